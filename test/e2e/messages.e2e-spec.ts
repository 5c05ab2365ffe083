import Anthropic from '@anthropic-ai/sdk';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { fixtureModel, ROOT, STORIES } from './helpers/fixtures';
import { greedyFetch, postJson, RunningServer, startServer } from './helpers/server';

/** The whole prompt: input_tokens leave out what was read from the prefix cache (Anthropic's accounting). */
const promptOf = (u: Anthropic.Usage) => u.input_tokens + (u.cache_read_input_tokens ?? 0);

jest.setTimeout(120_000);

const USER = [{ role: 'user' as const, content: 'Once upon a time' }];

describe('messages dialect on the real engine (stories260K)', () => {
  let srv: RunningServer;
  let client: Anthropic;

  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
    client = new Anthropic({ baseURL: srv.url, apiKey: 'any-string', fetch: greedyFetch });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('creates a message with the dialect shape and usage', async () => {
    const m = await client.messages.create({ model: 'stories260K', max_tokens: 20, messages: USER });
    expect(m.id).toMatch(/^msg_/);
    expect(m.type).toBe('message');
    expect(m.role).toBe('assistant');
    expect(m.model).toBe('stories260K');
    expect(m.content[0].type).toBe('text');
    expect((m.content[0] as Anthropic.TextBlock).text.length).toBeGreaterThan(0);
    expect(['end_turn', 'max_tokens']).toContain(m.stop_reason);
    expect(m.stop_sequence).toBeNull();
    expect(m.usage.input_tokens).toBeGreaterThan(0);
    expect(m.usage.output_tokens).toBeGreaterThan(0);
    expect(m.usage.output_tokens).toBeLessThanOrEqual(20);
    expect(typeof m.usage.cache_read_input_tokens).toBe('number');
    expect(m.usage.cache_creation_input_tokens).toBe(0);
  });

  it('reports max_tokens when the limit ends the answer', async () => {
    const m = await client.messages.create({ model: '', max_tokens: 3, messages: USER });
    expect(m.stop_reason).toBe('max_tokens');
    expect(m.usage.output_tokens).toBe(3);
  });

  it('streams the named events; the SDK accumulates the same message as unstreamed', async () => {
    const body = { model: '', max_tokens: 24, system: 'A story.', messages: USER };
    const whole = await client.messages.create(body);
    const stream = client.messages.stream(body);
    const types: string[] = [];
    let text = '';
    stream.on('text', (t) => (text += t));
    for await (const ev of stream) types.push(ev.type);
    const final = await stream.finalMessage();
    expect(types[0]).toBe('message_start');
    expect(types).toContain('content_block_start');
    expect(types).toContain('content_block_delta');
    expect(types).toContain('content_block_stop');
    expect(types.slice(-2)).toEqual(['message_delta', 'message_stop']);
    expect(text).toBe((whole.content[0] as Anthropic.TextBlock).text);
    expect(final.content).toEqual(whole.content);
    expect(final.stop_reason).toBe(whole.stop_reason);
    expect(final.usage.output_tokens).toBe(whole.usage.output_tokens);
    expect(promptOf(final.usage)).toBe(promptOf(whole.usage));

    const raw = await fetch(`${srv.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }) });
    expect(raw.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const frames = (await raw.text()).trim().split('\n\n');
    expect(frames[0].startsWith('event: message_start\ndata: ')).toBe(true);
    expect(frames[1]).toBe('event: ping\ndata: {"type":"ping"}');
    expect(frames[frames.length - 1]).toBe('event: message_stop\ndata: {"type":"message_stop"}');
  });

  it('stops at a stop sequence and names it', async () => {
    const base = { model: '', max_tokens: 40, messages: USER };
    const free = await client.messages.create(base);
    const full = (free.content[0] as Anthropic.TextBlock).text;
    const stop = full.slice(8, 12);
    expect(stop.length).toBe(4);
    const m = await client.messages.create({ ...base, stop_sequences: ['zzzz-never', stop] });
    expect(m.stop_reason).toBe('stop_sequence');
    expect(m.stop_sequence).toBe(stop);
    expect((m.content[0] as Anthropic.TextBlock).text).toBe(full.slice(0, full.indexOf(stop)));
    const s = await client.messages.stream({ ...base, stop_sequences: [stop] }).finalMessage();
    expect(s.stop_reason).toBe('stop_sequence');
    expect(s.stop_sequence).toBe(stop);
  });

  it('an answer with nothing visible has empty content, streamed or not (no empty text block)', async () => {
    const base = { model: '', max_tokens: 40, messages: USER };
    const full = ((await client.messages.create(base)).content[0] as Anthropic.TextBlock).text;
    // A stop sequence at the very start: nothing is left to show.
    const body = { ...base, stop_sequences: [full.slice(0, 3)] };
    const m = await client.messages.create(body);
    expect([m.stop_reason, m.content]).toEqual(['stop_sequence', []]);
    const raw = await fetch(`${srv.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true, temperature: 0 }) });
    const types = (await raw.text()).split('\n').filter((l) => l.startsWith('event: ')).map((l) => l.slice(7));
    expect(types).toEqual(['message_start', 'ping', 'message_delta', 'message_stop']);
    expect((await client.messages.stream(body).finalMessage()).content).toEqual([]);
  });

  it('continues a final assistant message (prefill): content holds only the continuation', async () => {
    const prefill = 'Jack was very';
    const m = await client.messages.create({ model: '', max_tokens: 12, messages: [...USER, { role: 'assistant', content: prefill }] });
    const text = (m.content[0] as Anthropic.TextBlock).text;
    expect(text.length).toBeGreaterThan(0);
    expect(text.startsWith(prefill)).toBe(false);
    const count = await client.messages.countTokens({ model: '', messages: [...USER, { role: 'assistant', content: prefill }] });
    const plain = await client.messages.countTokens({ model: '', messages: USER });
    expect(count.input_tokens).toBeGreaterThan(plain.input_tokens);
    expect(promptOf(m.usage)).toBe(count.input_tokens);
  });

  it('counts tokens of the rendered prompt, system and tools included', async () => {
    const base = await client.messages.countTokens({ model: '', messages: USER });
    expect(base.input_tokens).toBeGreaterThan(0);
    expect((base as any).svc_model).toBe('stories260K');
    const withSystem = await client.messages.countTokens({ model: '', system: 'You tell short stories.', messages: USER });
    expect(withSystem.input_tokens).toBeGreaterThan(base.input_tokens);
    const m = await client.messages.create({ model: '', max_tokens: 2, messages: USER });
    expect(promptOf(m.usage)).toBe(base.input_tokens);
    const tools = [{ name: 'get_weather', description: 'Weather of a city', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] } }];
    const withTools = await client.messages.countTokens({ model: '', tools, messages: USER });
    expect(withTools.input_tokens).toBeGreaterThan(base.input_tokens);
    const t = await client.messages.create({ model: '', max_tokens: 2, tools, messages: USER });
    expect(promptOf(t.usage)).toBe(withTools.input_tokens);
  });

  it('accepts tool_use / tool_result history blocks', async () => {
    const m = await client.messages.create({
      model: '',
      max_tokens: 4,
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }, { type: 'text', text: 'Thanks' }] },
      ],
    });
    expect(m.type).toBe('message');
  });

  it('answers errors in the dialect shape', async () => {
    await expect(client.messages.create({ model: 'no-such-model', max_tokens: 4, messages: USER })).rejects.toMatchObject({ status: 404 });
    await expect(client.messages.create({ model: '', max_tokens: 4, messages: [] })).rejects.toMatchObject({ status: 400 });
    const empty = await postJson(`${srv.url}/v1/messages`, { model: '', messages: [] });
    expect(empty.json).toEqual({ error: { message: 'messages is empty', type: 'Bad Request' } });
    const unknown = await postJson(`${srv.url}/v1/messages`, { model: 'no-such-model', messages: USER });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.message).toMatch(/^no model named no-such-model/);
    expect(unknown.json.error.type).toBe('Not Found');
    const server = await postJson(`${srv.url}/v1/messages`, { model: '', messages: USER, tools: [{ type: 'web_search_20250305', name: 'web_search' }] });
    expect(server.status).toBe(400);
    expect(server.json.error.message).toMatch(/server-side tool/);
    const lp = await postJson(`${srv.url}/v1/messages`, { model: '', messages: USER, logprobs: true });
    expect(lp.status).toBe(400);
    const bad = await postJson(`${srv.url}/v1/messages`, { model: '', messages: [{ role: 'user', content: [{ type: 'bogus' }] }] });
    expect(bad.status).toBe(400);
  });

  it('accepts x-api-key and anthropic-version headers on a server without keys', async () => {
    const r = await postJson(`${srv.url}/v1/messages`, { model: '', max_tokens: 2, messages: USER }, { 'x-api-key': 'anything', 'anthropic-version': '2023-06-01' });
    expect(r.status).toBe(200);
  });
});

/** Tool use needs a model with a chat template: the synthetic qwen2 fixture (chatml). */
describe('messages dialect tool use (synthetic qwen2-tiny)', () => {
  let srv: RunningServer;
  let client: Anthropic;
  const tools: Anthropic.Tool[] = [
    {
      name: 'get_weather',
      description: 'Weather for a city',
      input_schema: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Rome'] } }, required: ['city'], additionalProperties: false },
    },
  ];

  beforeAll(async () => {
    const model = execFileSync(process.execPath, [join(ROOT, 'test', 'fixtures', 'models.mjs'), 'qwen2-tiny'], { encoding: 'utf8', timeout: 600_000 }).trim().split('\n').pop()!;
    srv = await startServer(['-m', model, '-threads', '2']);
    client = new Anthropic({ baseURL: srv.url, apiKey: 'any-string', fetch: greedyFetch });
  }, 600_000);
  afterAll(async () => {
    await srv?.stop();
  });

  // qwen2-tiny's template has no tool-call format: the forced call goes through the JSON-call fallback.
  it('forces a tool call with tool_choice {type: "tool"} and round-trips the result', async () => {
    const first = await client.messages.create({
      model: '',
      max_tokens: 256,
      tools,
      tool_choice: { type: 'tool', name: 'get_weather' },
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    });
    expect(first.stop_reason).toBe('tool_use');
    const call = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')!;
    expect(call.name).toBe('get_weather');
    expect(['Paris', 'Rome']).toContain((call.input as { city: string }).city);
    expect(call.id.length).toBeGreaterThan(0);

    const streamed = await client.messages.stream({
      model: '',
      max_tokens: 256,
      tools,
      tool_choice: { type: 'tool', name: 'get_weather' },
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    }).finalMessage();
    expect(streamed.stop_reason).toBe('tool_use');
    expect(streamed.content.find((b) => b.type === 'tool_use')).toMatchObject({ name: 'get_weather', input: call.input });

    const second = await client.messages.create({
      model: '',
      max_tokens: 8,
      tools,
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny, 21 C' }] },
      ],
    });
    expect(second.type).toBe('message');
    expect(promptOf(second.usage)).toBeGreaterThan(promptOf(first.usage));
  });

  it('earlier calls stay in the prompt on a template without a call format (they were dropped)', async () => {
    const tokens = async (args: string) => {
      const call = { id: 'c1', type: 'function', function: { name: 'get_weather', arguments: args } };
      const messages = [{ role: 'user', content: 'Weather?' }, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: 'c1', content: '{"t":20}' }];
      const r = await postJson(`${srv.url}/v1/chat/completions`, { messages, max_tokens: 1, svc_retain_prefix: false });
      expect(r.status).toBe(200);
      return r.json.usage.prompt_tokens as number;
    };
    const long = await tokens('{"city":"Paris, the one in France, not the one in Texas"}');
    expect(long).toBeGreaterThan(await tokens('{}'));
    // Arguments that are no JSON (a model's broken call sent back) are taken as the API takes them.
    expect(await tokens('not json')).toBeGreaterThan(await tokens(''));
  });

  it('an empty system ("" or no blocks) is no system: the template\'s default system prompt stays', async () => {
    const messages = [{ role: 'user' as const, content: 'x' }];
    const none = (await client.messages.countTokens({ model: '', messages })).input_tokens;
    expect((await client.messages.countTokens({ model: '', messages, system: '' })).input_tokens).toBe(none);
    expect((await client.messages.countTokens({ model: '', messages, system: [] })).input_tokens).toBe(none);
    expect((await client.messages.countTokens({ model: '', messages, system: 'Be brief.' })).input_tokens).not.toBe(none);
  });

  it('a forced call cut by max_tokens is dropped, not sent as its raw JSON text (streamed or not)', async () => {
    const body = { model: '', max_tokens: 12, tools, tool_choice: { type: 'any' as const }, messages: [{ role: 'user' as const, content: 'Weather in Paris?' }] };
    const cut = await client.messages.create(body);
    const streamed = await client.messages.stream(body).finalMessage();
    for (const m of [cut, streamed]) {
      expect(m.stop_reason).toBe('max_tokens');
      // Nothing visible came: content is empty, as the dialect's API answers (no empty text block).
      expect(m.content).toEqual([]);
    }
    // The same through chat completions (the fallback parser is the engine's).
    const chat = await postJson(`${srv.url}/v1/chat/completions`, { ...body, tool_choice: 'required', tools: [{ type: 'function', function: { name: tools[0].name, parameters: tools[0].input_schema } }] });
    expect([chat.json.choices[0].finish_reason, chat.json.choices[0].message.content, chat.json.choices[0].message.tool_calls]).toEqual(['length', '', undefined]);
  });
});
