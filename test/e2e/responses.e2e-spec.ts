import OpenAI from 'openai';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixtureModel, ROOT, STORIES } from './helpers/fixtures';
import { postJson, RunningServer, startServer, aliceAndBobCallers } from './helpers/server';

jest.setTimeout(180_000);

type Input = OpenAI.Responses.ResponseInput;
const user = (content: string) => ({ role: 'user' as const, content });
const assistant = (content: string) => ({ role: 'assistant' as const, content });

describe('responses API on the real engine (stories260K)', () => {
  let srv: RunningServer;
  let client: OpenAI;
  // Greedy, short turns: the same prompt gives the same text.
  const turn = (body: Partial<OpenAI.Responses.ResponseCreateParamsNonStreaming>) =>
    client.responses.create({ model: '', input: '', max_output_tokens: 16, temperature: 0, ...body } as OpenAI.Responses.ResponseCreateParamsNonStreaming);

  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'any-string' });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('answers a response object, and streams the public event sequence with the same text', async () => {
    const body = { model: '', input: 'Once upon a time', max_output_tokens: 24, temperature: 0 };
    const whole = await client.responses.create(body);
    expect(whole.id).toMatch(/^resp_/);
    expect(whole.object).toBe('response');
    expect(whole.model).toBe('stories260K');
    expect(typeof whole.created_at).toBe('number');
    const msg = whole.output[0] as OpenAI.Responses.ResponseOutputMessage;
    expect(msg).toMatchObject({ type: 'message', role: 'assistant' });
    expect(msg.id).toMatch(/^msg_/);
    expect(msg.content[0]).toMatchObject({ type: 'output_text', annotations: [] });
    expect(whole.output_text.length).toBeGreaterThan(0);
    const u = whole.usage!;
    expect(u.input_tokens).toBeGreaterThan(0);
    expect(u.output_tokens).toBeGreaterThan(0);
    expect(u.total_tokens).toBe(u.input_tokens + u.output_tokens);
    expect(u.input_tokens_details.cached_tokens).toBe(0);

    const types: string[] = [];
    let text = '';
    for await (const ev of await client.responses.create({ ...body, stream: true })) {
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
    }
    expect(text).toBe(whole.output_text);
    const distinct = types.filter((t, i) => t !== types[i - 1]);
    expect(distinct).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      whole.status === 'completed' ? 'response.completed' : 'response.incomplete',
    ]);

    // The helper accumulates the events into the same response.
    const final = await client.responses.stream(body).finalResponse();
    expect(final.output_text).toBe(whole.output_text);
    expect(final.status).toBe(whole.status);
    expect((await client.responses.retrieve(final.id)).output_text).toBe(whole.output_text);

    const raw = await fetch(`${srv.url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }) });
    expect(raw.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const frames = (await raw.text()).trim().split('\n\n');
    expect(frames[0]).toMatch(/^event: response.created\ndata: /);
    expect(frames[frames.length - 1]).toBe('data: [DONE]');
  });

  it('include message.output_text.logprobs / top_logprobs: the answer\'s tokens, as chat completions gives them, streamed too', async () => {
    const chat = await client.chat.completions.create({ model: '', messages: [user('Once upon a time')], max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 3 });
    const expected = chat.choices[0].logprobs!.content!;
    expect(expected.length).toBeGreaterThan(5);
    const body = { input: 'Once upon a time', max_output_tokens: 12, top_logprobs: 3, include: ['message.output_text.logprobs' as const] };
    const text = (r: OpenAI.Responses.Response) => (r.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText;
    // The same tokens and alternatives; the numbers to float noise (a prompt read from the prefix cache computes in other batches).
    const near = (lps: Array<{ token: string; logprob: number; top_logprobs?: Array<{ token?: string; logprob?: number }> }>, top = true) => {
      expect(lps.map((l) => [l.token, top ? l.top_logprobs?.map((t) => t.token) : []])).toEqual(expected.map((l) => [l.token, top ? l.top_logprobs.map((t) => t.token) : []]));
      lps.forEach((l, i) => expect(l.logprob).toBeCloseTo(expected[i].logprob, 3));
    };
    const whole = text(await turn(body));
    expect(whole.text).toBe(chat.choices[0].message.content);
    near(whole.logprobs!);
    expect(Object.keys(whole.logprobs![0]).sort()).toEqual(['bytes', 'logprob', 'token', 'top_logprobs']);
    const stream = client.responses.stream({ model: '', temperature: 0, ...body });
    const deltas: OpenAI.Responses.ResponseTextDeltaEvent.Logprob[] = [];
    stream.on('response.output_text.delta', (e) => deltas.push(...e.logprobs));
    const final = text(await stream.finalResponse());
    near(final.logprobs!);
    expect(deltas).toEqual(final.logprobs);
    // Without alternatives, and not asked for at all (it was always []).
    const bare = text(await turn({ ...body, top_logprobs: undefined }));
    near(bare.logprobs!, false);
    expect(bare.logprobs!.every((l) => l.top_logprobs.length === 0)).toBe(true);
    expect(text(await turn({ input: 'Once upon a time', max_output_tokens: 12 })).logprobs).toEqual([]);
    const bad = await postJson(`${srv.url}/v1/responses`, { input: 'x', top_logprobs: 21 });
    expect(bad.status).toBe(400);
  });

  it('reads a stored response with GET, releases it with DELETE, then answers 404', async () => {
    const r = await turn({ input: 'Once upon a time' });
    const got = await client.responses.retrieve(r.id);
    expect(got).toMatchObject({ id: r.id, object: 'response', status: r.status, output: r.output, usage: r.usage });
    await client.responses.delete(r.id);
    await expect(client.responses.retrieve(r.id)).rejects.toMatchObject({ status: 404 });
    const again = await fetch(`${srv.url}/v1/responses/${r.id}`, { method: 'DELETE' });
    expect(again.status).toBe(404);
    expect(await again.json()).toEqual({ error: { message: `no response with id ${r.id}`, type: 'Not Found' } });
    expect((await fetch(`${srv.url}/v1/responses/resp_unknown`)).status).toBe(404);
  });

  it('lists a response\'s input items (the official client\'s inputItems.list), paged newest first', async () => {
    const input: Input = [
      { role: 'developer', content: 'Tell a story.' },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Once upon' }] },
      { role: 'assistant', content: 'a time' },
      { role: 'user', content: 'go on' },
    ];
    const r = await turn({ input });
    const all: OpenAI.Responses.ResponseItem[] = [];
    for await (const item of client.responses.inputItems.list(r.id, { order: 'asc', limit: 3 })) all.push(item);
    expect(all.map((i) => (i as OpenAI.Responses.ResponseInputMessageItem).role)).toEqual(['developer', 'user', 'assistant', 'user']);
    expect(all.every((i) => i.type === 'message' && i.id.startsWith('msg_'))).toBe(true);
    expect((all[0] as OpenAI.Responses.ResponseInputMessageItem).content).toEqual([{ type: 'input_text', text: 'Tell a story.' }]);
    expect((all[2] as any).content).toEqual([{ type: 'output_text', text: 'a time' }]);
    const first = await client.responses.inputItems.list(r.id, { limit: 2 });
    expect(first.data.map((i) => i.id)).toEqual([all[3].id, all[2].id]);
    expect(first.has_more).toBe(true);
    const page = await fetch(`${srv.url}/v1/responses/${r.id}/input_items?after=${all[2].id}`).then((x) => x.json());
    expect(page).toMatchObject({ object: 'list', first_id: all[1].id, last_id: all[0].id, has_more: false });
    // A string input is one user message; another owner's or an unknown response is 404.
    const plain = await turn({ input: 'Once' });
    expect((await client.responses.inputItems.list(plain.id)).data).toMatchObject([{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Once' }], status: 'completed' }]);
    expect((await fetch(`${srv.url}/v1/responses/resp_unknown/input_items`)).status).toBe(404);
    expect((await fetch(`${srv.url}/v1/responses/${r.id}/input_items?limit=0`)).status).toBe(400);
  });

  it('reads instructions as this turn\'s system message', async () => {
    const plain = await turn({ input: 'Once upon a time' });
    const told = await turn({ input: 'Once upon a time', instructions: 'Tell a story about a dog.' });
    expect(told.instructions).toBe('Tell a story about a dog.');
    expect(told.usage!.input_tokens).toBeGreaterThan(plain.usage!.input_tokens);
    // The same prompt sent as messages gives the same greedy text.
    const asMessages = await turn({ input: [{ role: 'developer', content: 'Tell a story about a dog.' }, user('Once upon a time')] });
    expect(asMessages.output_text).toBe(told.output_text);
    expect(asMessages.usage!.input_tokens).toBe(told.usage!.input_tokens);
  });

  it('stops at max_output_tokens with status incomplete and the reason', async () => {
    const r = await turn({ input: 'Once upon a time', max_output_tokens: 5 });
    expect(r.status).toBe('incomplete');
    expect(r.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(r.usage!.output_tokens).toBe(5);
    expect(r.max_output_tokens).toBe(5);
    const streamed = await client.responses.stream({ model: '', input: 'Once upon a time', max_output_tokens: 5, temperature: 0 }).finalResponse();
    expect(streamed.status).toBe('incomplete');
    expect(streamed.output_text).toBe(r.output_text);
  });

  it('enforces text.format json_schema: the output parses and validates', async () => {
    const schema = {
      type: 'object',
      properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 0, maximum: 9 }, tag: { type: 'string', enum: ['cat', 'dog'] } },
      required: ['ok', 'n', 'tag'],
      additionalProperties: false,
    };
    for (const seed of [1, 2, 3]) {
      const r = await client.responses.create({
        model: '',
        input: 'Give me JSON',
        max_output_tokens: 64,
        temperature: 1,
        seed,
        text: { format: { type: 'json_schema', name: 'thing', schema, strict: true } },
      } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
      expect(r.status).toBe('completed');
      const v = JSON.parse(r.output_text);
      expect(Object.keys(v).sort()).toEqual(['n', 'ok', 'tag']);
      expect(typeof v.ok).toBe('boolean');
      expect(Number.isInteger(v.n) && v.n >= 0 && v.n <= 9).toBe(true);
      expect(['cat', 'dog']).toContain(v.tag);
    }
  });

  it('continues a turn from its KV context: branches are independent, and the prompt is not read again', async () => {
    const t1 = await turn({ input: 'Once upon a time' });
    const t2a = await turn({ input: 'The dog ran', previous_response_id: t1.id });
    const t2b = await turn({ input: 'A big red ball', previous_response_id: t1.id });
    const t3a = await turn({ input: 'Then the sun', previous_response_id: t2a.id });
    expect(t2a.previous_response_id).toBe(t1.id);
    expect(new Set([t1.id, t2a.id, t2b.id, t3a.id]).size).toBe(4);

    // Each branch answers exactly as its own conversation sent whole.
    const whole = (input: Input) => turn({ input });
    const w2a = await whole([user('Once upon a time'), assistant(t1.output_text), user('The dog ran')]);
    const w2b = await whole([user('Once upon a time'), assistant(t1.output_text), user('A big red ball')]);
    const w3a = await whole([user('Once upon a time'), assistant(t1.output_text), user('The dog ran'), assistant(t2a.output_text), user('Then the sun')]);
    expect(t2a.output_text).toBe(w2a.output_text);
    expect(t2b.output_text).toBe(w2b.output_text);
    expect(t3a.output_text).toBe(w3a.output_text);
    expect(t2a.usage!.input_tokens).toBe(w2a.usage!.input_tokens);
    expect(t3a.usage!.input_tokens).toBe(w3a.usage!.input_tokens);
    // t3a's history holds t2a, not t2b.
    expect(t3a.usage!.input_tokens).toBeGreaterThan(t2a.usage!.input_tokens + t2a.usage!.output_tokens);

    // The earlier turn's context (its prompt and all but the last sampled token) is reused.
    const held = (r: OpenAI.Responses.Response) => r.usage!.input_tokens + r.usage!.output_tokens - 1;
    for (const [next, prev] of [[t2a, t1], [t2b, t1], [t3a, t2a]] as const) {
      const cached = next.usage!.input_tokens_details.cached_tokens;
      expect(cached).toBeGreaterThanOrEqual(held(prev) - 2);
      expect(cached).toBeLessThanOrEqual(held(prev));
    }
    expect(w2a.usage!.input_tokens_details.cached_tokens).toBe(0);

    // Two branches from one turn at the same time: forks of one context wait for each other, never 409.
    const [c1, c2] = await Promise.all([turn({ input: 'The dog ran', previous_response_id: t1.id }), turn({ input: 'A big red ball', previous_response_id: t1.id })]);
    expect([c1.output_text, c2.output_text]).toEqual([t2a.output_text, t2b.output_text]);

    // A chained turn can be streamed too.
    const s2a = await client.responses.stream({ model: '', input: 'The dog ran', previous_response_id: t1.id, max_output_tokens: 16, temperature: 0 }).finalResponse();
    expect(s2a.output_text).toBe(t2a.output_text);
    expect(s2a.usage!.input_tokens_details.cached_tokens).toBe(t2a.usage!.input_tokens_details.cached_tokens);

    // Response contexts are the server's own: not listed among the caller's contexts.
    expect(((await (await fetch(`${srv.url}/v1/contexts`)).json()) as any).data).toEqual([]);
  });

  it('keeps only the last 256 stored responses; the rest still continue from their contexts', async () => {
    const first = await turn({ input: 'Once upon a time', max_output_tokens: 2 });
    const second = await turn({ input: 'Once upon a time', max_output_tokens: 2 });
    // 255 more: `first` is now the 257th newest (earlier tests' responses are older still).
    for (let i = 0; i < 255; i++) await turn({ input: `Story ${i}`, max_output_tokens: 1 });
    await expect(client.responses.retrieve(first.id)).rejects.toMatchObject({ status: 404 });
    await expect(turn({ input: 'More', previous_response_id: first.id })).rejects.toMatchObject({ status: 404 });
    expect((await client.responses.retrieve(second.id)).id).toBe(second.id);
    // Its context went to disk among 256 others and comes back intact.
    const next = await turn({ input: 'The dog ran', previous_response_id: second.id });
    const whole = await turn({ input: [user('Once upon a time'), assistant(second.output_text), user('The dog ran')] });
    expect(next.output_text).toBe(whole.output_text);
    expect(next.usage!.input_tokens_details.cached_tokens).toBeGreaterThan(0);
  });

  it('store: false keeps neither the record nor its context', async () => {
    const r = await turn({ input: 'Once upon a time', store: false });
    expect((r as any).store).toBe(false);
    await expect(client.responses.retrieve(r.id)).rejects.toMatchObject({ status: 404 });
    await expect(turn({ input: 'More', previous_response_id: r.id })).rejects.toMatchObject({ status: 404 });
  });

  it('refuses bad input with 400 in the spec error shape', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ input: 42 }, /^cannot parse request: input: must be a string or an array of input items/],
      [{}, /^cannot parse request: input/],
      [{ input: [{ type: 'bogus' }] }, /^cannot parse request: input\[0\]\.type must be message, function_call, function_call_output or reasoning/],
      [{ input: [{ role: 'wizard', content: 'hi' }] }, /^cannot parse request: input\[0\]\.role must be user, assistant, system or developer/],
      [{ input: [{ role: 'user', content: 7 }] }, /^cannot parse request: input\[0\]\.content must be a string or an array of parts/],
      [{ input: 'hi', previous_response_id: 'not-a-response' }, /^previous_response_id must be a response id \(resp_\.\.\.\)/],
      [{ input: 'hi', previous_response_id: 12 }, /^cannot parse request: previous_response_id/],
      [{ input: 'hi', max_output_tokens: 0 }, /^cannot parse request: max_output_tokens/],
      [{ input: 'hi', text: { format: { type: 'yaml' } } }, /^text\.format\.type must be text, json_object or json_schema/],
      [{ input: 'hi', text: { format: { type: 'json_schema', name: 'x' } } }, /^text\.format\.schema must be a JSON Schema object/],
      [{ input: 'hi', tools: [{ type: 'web_search' }] }, /^tools\[0\] is a hosted tool \(web_search\)/],
      [{ input: 'hi', svc_session: 'a' }, /^svc_session is not available on \/v1\/responses/],
    ];
    for (const [body, message] of cases) {
      const r = await postJson(`${srv.url}/v1/responses`, body);
      expect([r.status, r.json?.error?.type]).toEqual([400, 'Bad Request']);
      expect(r.json.error.message).toMatch(message);
    }
    await expect(turn({ input: 42 as unknown as string })).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    const missing = await postJson(`${srv.url}/v1/responses`, { input: 'hi', previous_response_id: 'resp_doesnotexist' });
    expect(missing.status).toBe(404);
    expect(missing.json).toEqual({ error: { message: 'no response with id resp_doesnotexist', type: 'Not Found' } });
  });
});

describe('responses API function tools (synthetic qwen2.5-tiny, real Qwen2.5 template)', () => {
  let srv: RunningServer;
  let client: OpenAI;
  const tools: OpenAI.Responses.FunctionTool[] = [
    {
      type: 'function',
      name: 'get_weather',
      description: 'Weather for a city',
      parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Rome'] } }, required: ['city'], additionalProperties: false },
      strict: true,
    },
  ];
  const ask = { model: '', input: 'Weather in Paris?', tools, tool_choice: 'required' as const, max_output_tokens: 128, temperature: 0 };

  beforeAll(async () => {
    const model = execFileSync(process.execPath, [join(ROOT, 'test', 'fixtures', 'models.mjs'), 'qwen2.5-tiny'], { encoding: 'utf8', timeout: 600_000 }).trim().split('\n').pop()!;
    srv = await startServer(['-m', model, '-threads', '2']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'any-string' });
  }, 600_000);
  afterAll(async () => {
    await srv?.stop();
  });

  it('a required tool yields a function_call item with valid arguments, and the next turn takes its output', async () => {
    const first = await client.responses.create(ask);
    expect(first.status).toBe('completed');
    const call = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call')!;
    expect(call).toBeDefined();
    expect(call.name).toBe('get_weather');
    expect(call.id).toMatch(/^fc_/);
    expect(call.call_id.length).toBeGreaterThan(0);
    expect(['Paris', 'Rome']).toContain(JSON.parse(call.arguments).city);

    // Streamed: function-call argument events, same call.
    const types: string[] = [];
    const stream = client.responses.stream(ask);
    stream.on('event', (ev) => types.push(ev.type));
    const streamed = await stream.finalResponse();
    expect(types).toEqual(expect.arrayContaining(['response.function_call_arguments.delta', 'response.function_call_arguments.done', 'response.completed']));
    expect(streamed.output.find((o) => o.type === 'function_call')).toMatchObject({ name: 'get_weather', arguments: call.arguments });

    // Next turn on the stored context: only the tool result is sent.
    const second = await client.responses.create({
      model: '',
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: 'sunny, 21 C' }],
      tools,
      max_output_tokens: 8,
      temperature: 0,
    });
    expect(['completed', 'incomplete']).toContain(second.status);
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens);
    expect(second.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(first.usage!.input_tokens);

    // The same round trip sent whole (the call item echoed back as input) reads the same prompt.
    const whole = await client.responses.create({
      model: '',
      input: [{ role: 'user', content: 'Weather in Paris?' }, call, { type: 'function_call_output', call_id: call.call_id, output: 'sunny, 21 C' }],
      tools,
      max_output_tokens: 8,
      temperature: 0,
    });
    expect(whole.usage!.input_tokens).toBe(second.usage!.input_tokens);
    expect(whole.output_text).toBe(second.output_text);

    // An output for a call nobody made is refused, as OpenAI refuses it, chained or sent whole.
    for (const body of [
      { previous_response_id: first.id, input: [{ type: 'function_call_output', call_id: 'call_nobody', output: 'x' }] },
      { input: [{ role: 'user', content: 'Weather?' }, { type: 'function_call_output', call_id: call.call_id, output: 'x' }] },
    ]) {
      const r = await postJson(`${srv.url}/v1/responses`, { model: '', tools, max_output_tokens: 4, ...body });
      expect([r.status, r.json.error.message]).toEqual([400, expect.stringMatching(/^No tool call found for function call output with call_id call_/)]);
    }
  });
});

describe('responses on two models', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    const store = mkdtempSync(join(tmpdir(), 'svc-resp-two-'));
    copyFileSync(fixtureModel(STORIES), join(store, 'stories-copy.gguf'));
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '1', '-store', store]);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('GET and DELETE work whichever model made the response; a turn on another model re-reads the conversation', async () => {
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'any-string' });
    const body = { input: 'Once upon a time', max_output_tokens: 12, temperature: 0 };
    const a = await client.responses.create({ model: '', ...body });
    const b = await client.responses.create({ model: 'stories-copy', ...body });
    expect([a.model, b.model]).toEqual(['stories260K', 'stories-copy']);
    expect((await client.responses.retrieve(b.id)).model).toBe('stories-copy');
    // Continuing a's turn on the other model: its context stays where it was, the prompt is read whole.
    const moved = await client.responses.create({ model: 'stories-copy', previous_response_id: a.id, input: 'The dog ran', max_output_tokens: 12, temperature: 0 });
    expect(moved.usage!.input_tokens_details.cached_tokens).toBe(0);
    const stayed = await client.responses.create({ model: '', previous_response_id: a.id, input: 'The dog ran', max_output_tokens: 12, temperature: 0 });
    expect(stayed.usage!.input_tokens_details.cached_tokens).toBeGreaterThan(0);
    expect(moved.output_text).toBe(stayed.output_text); // same weights, same conversation
    for (const r of [a, b, moved, stayed]) await client.responses.delete(r.id);
    await expect(client.responses.retrieve(b.id)).rejects.toMatchObject({ status: 404 });
  });
});

describe('responses belong to their caller', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '1', '-callers', aliceAndBobCallers()]);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it("bob gets 404 for alice's response on GET, DELETE and previous_response_id", async () => {
    const alice = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'alice-key' });
    const bob = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'bob-key' });
    const r = await alice.responses.create({ model: '', input: 'Once upon a time', max_output_tokens: 8 });
    await expect(bob.responses.retrieve(r.id)).rejects.toMatchObject({ status: 404 });
    await expect(bob.responses.delete(r.id)).rejects.toMatchObject({ status: 404 });
    await expect(bob.responses.create({ model: '', input: 'More', previous_response_id: r.id, max_output_tokens: 8 })).rejects.toMatchObject({ status: 404 });
    expect((await alice.responses.retrieve(r.id)).id).toBe(r.id);
    const next = await alice.responses.create({ model: '', input: 'More', previous_response_id: r.id, max_output_tokens: 8 });
    expect(next.usage!.input_tokens_details.cached_tokens).toBeGreaterThan(0);
    await alice.responses.delete(r.id);
    await expect(alice.responses.retrieve(r.id)).rejects.toMatchObject({ status: 404 });
  });
});
