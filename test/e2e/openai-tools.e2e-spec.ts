import OpenAI from 'openai';
import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020';
import { syntheticModel } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(300_000);

const WEATHER = {
  type: 'object',
  properties: { city: { type: 'string', enum: ['Paris', 'Rome'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  required: ['city', 'days'],
  additionalProperties: false,
};
const TIME = { type: 'object', properties: { zone: { type: 'string', enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false };
const TOOLS: OpenAI.Chat.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: WEATHER } },
  { type: 'function', function: { name: 'get_time', description: 'The time in a zone', parameters: TIME } },
];
const ajv = new Ajv({ strict: true });
const validArgs: Record<string, (v: unknown) => boolean> = { get_weather: ajv.compile(WEATHER), get_time: ajv.compile(TIME) };
const USER: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'What is the weather in Paris for 3 days?' }];

/** A forced call is parseable, names one of the tools and has arguments valid for that tool's schema. */
function expectValidCall(r: OpenAI.Chat.ChatCompletion, only?: string): OpenAI.Chat.ChatCompletionMessageToolCall {
  const choice = r.choices[0];
  expect(choice.finish_reason).toBe('tool_calls');
  expect(choice.message.tool_calls).toHaveLength(1);
  const call = choice.message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
  expect(call.type).toBe('function');
  expect(call.id).toMatch(/^call_/);
  if (only) expect(call.function.name).toBe(only);
  expect(Object.keys(validArgs)).toContain(call.function.name);
  expect(validArgs[call.function.name](JSON.parse(call.function.arguments))).toBe(true);
  return call;
}

/** Parameters as pydantic writes a nested model: the nested one under $defs, used through a $ref. */
const SHIP = {
  $defs: {
    Address: {
      type: 'object',
      title: 'Address',
      properties: { city: { type: 'string', enum: ['Paris', 'Rome'] }, zip: { type: 'string', pattern: '^[0-9]{5}$' } },
      required: ['city', 'zip'],
      additionalProperties: false,
    },
  },
  type: 'object',
  title: 'Ship',
  properties: { to: { $ref: '#/$defs/Address', description: 'where to' }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  required: ['to', 'days'],
  additionalProperties: false,
};

/**
 * llama.cpp resolved "#/$defs/..." against the schema it wraps each tool's parameters in, and
 * refused every such tool (400 "Error resolving ref"); svc inlines them first. A recursive
 * model cannot be inlined and is refused by name.
 */
async function expectDefsToolWorks(srv: RunningServer, client: OpenAI): Promise<void> {
  const tools: OpenAI.Chat.ChatCompletionTool[] = [{ type: 'function', function: { name: 'ship', parameters: SHIP } }];
  const valid = new Ajv2020({ strict: true }).compile(SHIP);
  for (const seed of [1, 2]) {
    const r = await client.chat.completions.create({ model: '', messages: USER, tools, tool_choice: 'required', max_tokens: 200, temperature: 1, seed });
    const call = r.choices[0].message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    expect([r.choices[0].finish_reason, call.function.name]).toEqual(['tool_calls', 'ship']);
    expect(valid(JSON.parse(call.function.arguments))).toBe(true);
  }
  const tree = { $defs: { Node: { type: 'object', properties: { kids: { type: 'array', items: { $ref: '#/$defs/Node' } } } } }, type: 'object', properties: { root: { $ref: '#/$defs/Node' } } };
  const rec = await postJson(`${srv.url}/v1/chat/completions`, { messages: USER, tools: [{ type: 'function', function: { name: 'walk', parameters: tree } }], tool_choice: 'required' });
  expect(rec.status).toBe(400);
  expect(rec.json.error.message).toBe('tool "walk" parameters: the $ref #/$defs/Node refers to itself (a recursive schema), which a tool\'s parameters cannot use here');
  const dangling = await postJson(`${srv.url}/v1/chat/completions`, { messages: USER, tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { $ref: '#/$defs/Gone' } } } } }] });
  expect(dangling.status).toBe(400);
  expect(dangling.json.error.message).toBe('tool "f" parameters: the $ref #/$defs/Gone points at nothing in the schema');
}

/** Qwen2.5's real template: tools rendered by the template, calls constrained by llama.cpp's call grammar. */
describe('tools through the chat template (synthetic qwen2.5-tiny)', () => {
  let srv: RunningServer;
  let client: OpenAI;

  beforeAll(async () => {
    srv = await startServer(['-m', syntheticModel('qwen2.5-tiny'), '-threads', '2']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
  }, 600_000);
  afterAll(async () => {
    await srv?.stop();
  });

  it('tool_choice required yields a parseable call with valid arguments, for several seeds', async () => {
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create({ model: '', messages: USER, tools: TOOLS, tool_choice: 'required', max_tokens: 200, temperature: 1, seed });
      expectValidCall(r);
    }
  });

  it('a named function choice calls that function', async () => {
    for (const name of ['get_time', 'get_weather']) {
      const r = await client.chat.completions.create({ model: '', messages: USER, tools: TOOLS, tool_choice: { type: 'function', function: { name } }, max_tokens: 200, temperature: 0 });
      expectValidCall(r, name);
    }
    const unknown = await postJson(`${srv.url}/v1/chat/completions`, { messages: USER, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.message).toBe('tool_choice names the function "nope", which is not among the tools');
  });

  it('one call unless parallel_tool_calls is true', async () => {
    const body = { model: '', messages: USER, tools: TOOLS, tool_choice: 'required' as const, max_tokens: 200, temperature: 0 };
    // This random model writes two calls when the grammar lets it (llama.cpp's per-call grammar always does).
    const parallel = await client.chat.completions.create({ ...body, parallel_tool_calls: true });
    const calls = parallel.choices[0].message.tool_calls!;
    expect(calls.length).toBeGreaterThan(1);
    expect(new Set(calls.map((c) => c.id)).size).toBe(calls.length);
    for (const c of calls as OpenAI.Chat.ChatCompletionMessageFunctionToolCall[]) expect(validArgs[c.function.name](JSON.parse(c.function.arguments))).toBe(true);
    expectValidCall(await client.chat.completions.create({ ...body, parallel_tool_calls: false }));
  });

  it('a call cut by max_tokens is dropped, never sent with broken arguments; a cut answer says length', async () => {
    const body = { model: '', messages: USER, tools: TOOLS, tool_choice: 'required' as const, max_tokens: 200, temperature: 0 };
    const whole = await client.chat.completions.create({ ...body, parallel_tool_calls: true });
    expect(whole.choices[0].message.tool_calls!.length).toBeGreaterThan(1);
    // Half the tokens: the last call is cut, and never sent half-written.
    const cut = await client.chat.completions.create({ ...body, parallel_tool_calls: true, max_tokens: Math.ceil(whole.usage!.completion_tokens / 2) });
    expect(cut.choices[0].finish_reason).toBe('length');
    const kept = (cut.choices[0].message.tool_calls ?? []) as OpenAI.Chat.ChatCompletionMessageFunctionToolCall[];
    expect(kept.length).toBeLessThan(whole.choices[0].message.tool_calls!.length);
    for (const c of kept) expect(validArgs[c.function.name](JSON.parse(c.function.arguments))).toBe(true);
  });

  it('stop strings never cut a forced call: it is call syntax from its first token (a "\\n" stop lost every call)', async () => {
    const body = { model: '', messages: USER, tools: TOOLS, max_tokens: 200, temperature: 0 };
    for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }] as const) {
      const whole = await client.chat.completions.create({ ...body, tool_choice });
      expect(whole.choices[0].finish_reason).toBe('tool_calls');
      for (const stop of [['\n'], ['"'], ['\n\n', 'city']]) {
        const stopped = await client.chat.completions.create({ ...body, tool_choice, stop });
        expect([stop, stopped.choices[0].finish_reason, stopped.choices[0].message.tool_calls]).toEqual([stop, 'tool_calls', whole.choices[0].message.tool_calls!.map((c) => ({ ...c, id: expect.any(String) }))]);
      }
      const deltas: Array<{ function?: { arguments?: string } }> = [];
      for await (const chunk of await client.chat.completions.create({ ...body, tool_choice, stop: ['\n'], stream: true })) deltas.push(...(chunk.choices[0]?.delta.tool_calls ?? []));
      expect(deltas.map((d) => d.function?.arguments ?? '').join('')).toBe(whole.choices[0].message.tool_calls!.map((c) => (c as OpenAI.Chat.ChatCompletionMessageFunctionToolCall).function.arguments).join(''));
    }
    // The messages dialect's forced call (tool_choice any) with a stop sequence.
    const m = await postJson(`${srv.url}/v1/messages`, { max_tokens: 200, temperature: 0, messages: USER, tools: [{ name: 'get_weather', input_schema: WEATHER }], tool_choice: { type: 'any', disable_parallel_tool_use: true }, stop_sequences: ['\n'] });
    expect([m.json.stop_reason, m.json.content.map((b: { type: string }) => b.type)]).toEqual(['tool_use', ['tool_use']]);
  });

  it('a grammar with tools is a 400 (the tool grammar would replace it unseen); with tool_choice none it holds', async () => {
    const body = { messages: USER, tools: TOOLS, max_tokens: 8, temperature: 0, svc_grammar: 'root ::= "Hello world"' };
    const refused = await postJson(`${srv.url}/v1/chat/completions`, body);
    expect([refused.status, refused.json.error.message]).toEqual([400, 'svc_grammar (or grammar) cannot be combined with tools (unless tool_choice is none): a request takes one output constraint']);
    const none = await postJson(`${srv.url}/v1/chat/completions`, { ...body, tool_choice: 'none' });
    expect(none.json.choices[0].message.content).toBe('Hello world');
  });

  it('json_object (and the local runner\'s format "json") with tools: the answer is a JSON object or a call, never free text', async () => {
    // Text, when there is no call, is a JSON object: whole when the answer stopped, its start when max_tokens cut it.
    const check = (text: string, calls: number, finish: string) => {
      if (calls > 0) return;
      if (finish === 'length') expect(text.trimStart().startsWith('{')).toBe(true);
      else expect(typeof JSON.parse(text)).toBe('object');
    };
    // Answers with text (no call) that ended on their own, per dialect: the JSON check must have run on some.
    const whole = { openai: 0, ollama: 0 };
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create({ model: '', messages: USER, tools: TOOLS, response_format: { type: 'json_object' }, temperature: 1, seed, max_tokens: 200 });
      const rCalls = r.choices[0].message.tool_calls?.length ?? 0;
      check(r.choices[0].message.content ?? '', rCalls, r.choices[0].finish_reason);
      if (rCalls === 0 && r.choices[0].finish_reason === 'stop') whole.openai++;
      const o = await postJson(`${srv.url}/api/chat`, { model: '', messages: USER, tools: TOOLS, format: 'json', stream: false, options: { temperature: 1, seed, num_predict: 200 } });
      const oCalls = o.json.message.tool_calls?.length ?? 0;
      check(o.json.message.content, oCalls, o.json.done_reason);
      if (oCalls === 0 && o.json.done_reason === 'stop') whole.ollama++;
    }
    expect(whole.openai).toBeGreaterThan(0);
    expect(whole.ollama).toBeGreaterThan(0);
  });

  it('a required or named call with a response format is still a call (the format is for a text answer)', async () => {
    // The JSON answer branch made the call optional: a JSON text came back under "stop".
    const formats: OpenAI.Chat.ChatCompletionCreateParams['response_format'][] = [
      { type: 'json_object' },
      { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] } } },
    ];
    for (const response_format of formats) {
      expectValidCall(await client.chat.completions.create({ model: '', messages: USER, tools: TOOLS, tool_choice: 'required', response_format, max_tokens: 200, temperature: 0 }));
      const named = { type: 'function' as const, function: { name: 'get_time' } };
      expectValidCall(await client.chat.completions.create({ model: '', messages: USER, tools: TOOLS, tool_choice: named, response_format, max_tokens: 200, temperature: 0 }), 'get_time');
    }
  });

  it('/api/chat continues a final assistant message (a prefill), as /v1/messages does', async () => {
    const messages = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'Hello' }];
    const o = await postJson(`${srv.url}/api/chat`, { model: '', messages, stream: false, options: { temperature: 0, num_predict: 5 } });
    const m = await postJson(`${srv.url}/v1/messages`, { model: '', messages, max_tokens: 5, temperature: 0 });
    expect(o.json.prompt_eval_count).toBe(m.json.usage.input_tokens + (m.json.usage.cache_read_input_tokens ?? 0));
    expect(o.json.message.content).toBe(m.json.content[0].text);
    const closed = await postJson(`${srv.url}/api/chat`, { model: '', messages: [...messages, { role: 'user', content: 'and?' }], stream: false, options: { temperature: 0, num_predict: 1 } });
    expect(closed.json.prompt_eval_count).toBeGreaterThan(o.json.prompt_eval_count);
    // With tools offered the reply goes through llama.cpp's call parser, which reads the prefill
    // back as content: it is not sent again, streamed or not.
    const tools = [{ type: 'function', function: { name: 'w', parameters: { type: 'object', properties: {} } } }];
    const withTools = await postJson(`${srv.url}/api/chat`, { model: '', messages, tools, stream: false, options: { temperature: 0, num_predict: 5 } });
    expect(withTools.json.message.content).toBe(o.json.message.content);
    const streamed = await fetch(`${srv.url}/api/chat`, { method: 'POST', body: JSON.stringify({ model: '', messages, tools, options: { temperature: 0, num_predict: 5 } }) });
    const lines = (await streamed.text()).trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => l.message.content).join('')).toBe(o.json.message.content);
    const m2 = await postJson(`${srv.url}/v1/messages`, { model: '', messages, tools: [{ name: 'w', input_schema: { type: 'object', properties: {} } }], max_tokens: 5, temperature: 0 });
    expect(m2.json.content[0].text).toBe(m.json.content[0].text);
  });

  it('a prefill that looks like (or is) a call tag is not sent back: the content holds only the continuation', async () => {
    // "<tool" was held back as a possible tag start, then sent once the output went on.
    const tools = [{ type: 'function', function: { name: 'w', parameters: { type: 'object', properties: {} } } }];
    for (const prefill of ['<tool', '<tool_call>', ' <tool']) {
      const messages = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: prefill }];
      const body = { model: '', messages, options: { temperature: 0, num_predict: 6 } };
      const plain = (await postJson(`${srv.url}/api/chat`, { ...body, stream: false })).json.message.content;
      expect(plain.length).toBeGreaterThan(0);
      const withTools = await postJson(`${srv.url}/api/chat`, { ...body, tools, stream: false });
      expect([prefill, withTools.json.message.content]).toEqual([prefill, plain]);
      const streamed = await fetch(`${srv.url}/api/chat`, { method: 'POST', body: JSON.stringify({ ...body, tools }) });
      const lines = (await streamed.text()).trim().split('\n').map((l) => JSON.parse(l));
      expect([prefill, lines.map((l) => l.message.content).join('')]).toEqual([prefill, plain]);
    }
  });

  it('a prefill that opens a call ends the request (it hung, and the step\'s other requests failed)', async () => {
    const tools = [{ type: 'function', function: { name: 'get_time', parameters: TIME } }];
    const body = { model: '', stream: false, messages: [{ role: 'user', content: 'time in UTC' }, { role: 'assistant', content: '<tool_call>\n' }], tools, options: { temperature: 0, num_predict: 20 } };
    const [stuck, other] = await Promise.all([
      fetch(`${srv.url}/api/chat`, { method: 'POST', body: JSON.stringify(body), signal: AbortSignal.timeout(60_000) }),
      postJson(`${srv.url}/v1/completions`, { prompt: 'Once', max_tokens: 40, temperature: 0 }),
    ]);
    expect([stuck.status, ((await stuck.json()) as any).done, other.status]).toEqual([200, true, 200]);
  });

  it('a prefill that cannot begin the JSON of a format with tools is a 400 that says so (it was "invalid grammar: std::exception")', async () => {
    const tools = [{ type: 'function', function: { name: 'get_time', parameters: TIME } }];
    const ask = (prefill: string) =>
      postJson(`${srv.url}/api/chat`, { model: '', stream: false, format: 'json', tools, messages: [{ role: 'user', content: 'time?' }, { role: 'assistant', content: prefill }], options: { temperature: 0, num_predict: 8 } });
    const bad = await ask('Sure');
    expect([bad.status, bad.json.error]).toEqual([400, expect.stringMatching(/^the final assistant message \(a prefill\) cannot begin this answer: /)]);
    // One that starts the JSON is continued.
    expect((await ask('{"')).status).toBe(200);
  });

  it('tool_choice none never calls', async () => {
    const r = await client.chat.completions.create({ model: '', messages: USER, tools: TOOLS, tool_choice: 'none', max_tokens: 30, temperature: 0 });
    expect(r.choices[0].message.tool_calls).toBeUndefined();
    expect(r.choices[0].finish_reason).not.toBe('tool_calls');
    expect(typeof r.choices[0].message.content).toBe('string');
  });

  it('streamed tool calls arrive as deltas the client accumulates into the same call', async () => {
    const body = { model: '', messages: USER, tools: TOOLS, tool_choice: 'required' as const, max_tokens: 200, temperature: 0 };
    const whole = await client.chat.completions.create(body);
    const call = expectValidCall(whole) as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    const final = await client.chat.completions.stream(body).finalChatCompletion();
    expect(final.choices[0].finish_reason).toBe('tool_calls');
    const streamed = final.choices[0].message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    expect(streamed.function).toEqual(call.function);
    expect(streamed.id).toMatch(/^call_/);
    // And by hand: deltas keyed by index, arguments concatenated.
    const stream = await client.chat.completions.create({ ...body, stream: true });
    const acc: Record<number, { name: string; arguments: string }> = {};
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
        acc[d.index] ??= { name: '', arguments: '' };
        acc[d.index].name += d.function?.name ?? '';
        acc[d.index].arguments += d.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('tool_calls');
    expect(acc).toEqual({ 0: call.function });
  });

  it('a streamed forced call (or text held back) opens its stream at the first token, not when the answer is whole (every dialect)', async () => {
    // A string parameter: the random model writes it on to max_tokens, the call is never whole.
    const tools = [{ type: 'function', function: { name: 'write_file', parameters: { type: 'object', properties: { content: { type: 'string' } }, required: ['content'] } } }];
    const routes: Array<[string, Record<string, unknown>]> = [
      ['/v1/chat/completions', { messages: USER, tools, tool_choice: 'required' }],
      ['/v1/messages', { messages: USER, tools: [{ name: 'write_file', input_schema: tools[0].function.parameters }], tool_choice: { type: 'any' } }],
      ['/v1/responses', { input: USER, tools: [{ type: 'function', ...tools[0].function }], tool_choice: 'required' }],
    ];
    for (const [route, body] of routes) {
      const r = await fetch(`${srv.url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, model: '', max_tokens: 400, temperature: 0, stream: true }) });
      expect(r.status).toBe(200);
      const reader = r.body!.getReader();
      const first = new TextDecoder().decode((await reader.read()).value);
      expect(first).toMatch(/^(data|event): /);
      // The generation goes on behind the opening frames (they came with the whole call, at its end).
      const stats = (await (await fetch(`${srv.url}/v1/stats`)).json()) as any;
      expect([route, stats.active]).toEqual([route, 1]);
      await reader.cancel();
      for (let i = 0; i < 100 && ((await (await fetch(`${srv.url}/v1/stats`)).json()) as any).active > 0; i++) await new Promise((res) => setTimeout(res, 20));
    }
    // Text held back for a stop string whose start the answer keeps writing (greedy, this model
    // repeats "ค่อน" after "hi"): the headers still come at the first token.
    const stop = `${'ค่อน'.repeat(1600)}Z`;
    for (const [route, body] of [['/v1/completions', { prompt: 'hi' }], ['/api/generate', { prompt: 'hi', raw: true, options: { stop: [stop], num_predict: 400, temperature: 0 } }]] as const) {
      const r = await fetch(`${srv.url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: '', max_tokens: 400, stop: [stop], temperature: 0, stream: true, ...body }) });
      const stats = (await (await fetch(`${srv.url}/v1/stats`)).json()) as any;
      expect([route, r.status, stats.active]).toEqual([route, 200, 1]);
      await r.body!.cancel();
      for (let i = 0; i < 100 && ((await (await fetch(`${srv.url}/v1/stats`)).json()) as any).active > 0; i++) await new Promise((res) => setTimeout(res, 20));
    }
  });

  it('call arguments are the JSON the model wrote: a 16-digit integer is not rounded through a JS number', async () => {
    const tools = [{ type: 'function' as const, function: { name: 'order', parameters: { type: 'object', properties: { id: { type: 'integer', minimum: 9.1e15, maximum: 9.9e15 } }, required: ['id'] } } }];
    let rounded = 0;
    for (let seed = 1; seed <= 6; seed++) {
      const r = await client.chat.completions.create({ model: '', messages: USER, tools, tool_choice: 'required', max_tokens: 300, temperature: 1, seed, logprobs: true });
      expect(r.choices[0].finish_reason).toBe('tool_calls');
      const written = r.choices[0].logprobs!.content!.map((l) => l.token).join('').match(/"id"\s*:\s*(\d+)/)![1];
      const args = (r.choices[0].message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall).function.arguments;
      expect(args).toBe(`{"id":${written}}`);
      if (String(Number(written)) !== written) rounded++;
    }
    // Past 2^53 (about 9.007e15) a JS number rounds most such ids: they came back changed.
    expect(rounded).toBeGreaterThan(0);
  });

  it('the model reads the tools\' schemas as sent; only the grammar takes their enforceable form', async () => {
    const ask = (n: Record<string, unknown>, tool_choice: 'auto' | 'required' = 'auto') =>
      postJson(`${srv.url}/v1/chat/completions`, { messages: USER, tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { n }, required: ['n'] } } }], tool_choice, max_tokens: 200, temperature: 1, seed: 3 });
    const alone = (await ask({ type: 'integer', minimum: 100 })).json.usage.prompt_tokens;
    const bounded = (await ask({ type: 'integer', minimum: 100, maximum: Number.MAX_SAFE_INTEGER })).json.usage.prompt_tokens;
    // It was the same prompt: the rewrite's added maximum was in the template's tool list.
    expect(bounded).toBeGreaterThan(alone);
    const call = (await ask({ type: 'integer', minimum: 100 }, 'required')).json.choices[0].message.tool_calls[0];
    expect(JSON.parse(call.function.arguments).n).toBeGreaterThanOrEqual(100);
  });

  it('the next turn with the tool result continues, and its prompt is longer', async () => {
    const first = await client.chat.completions.create({ model: '', messages: USER, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 200, temperature: 0 });
    const call = expectValidCall(first, 'get_weather');
    const second = await client.chat.completions.create({
      model: '',
      tools: TOOLS,
      max_tokens: 16,
      temperature: 0,
      messages: [...USER, first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '{"forecast": "sunny", "high_c": 21}' }],
    });
    expect(['stop', 'length', 'tool_calls']).toContain(second.choices[0].finish_reason);
    expect(second.usage!.prompt_tokens).toBeGreaterThan(first.usage!.prompt_tokens);
    // The template renders the tool result into the prompt.
    const without = await client.chat.completions.create({ model: '', tools: TOOLS, max_tokens: 1, messages: [...USER, first.choices[0].message] });
    expect(second.usage!.prompt_tokens).toBeGreaterThan(without.usage!.prompt_tokens);
  });

  it('parameters with $defs and $ref (a pydantic nested model) give valid calls', async () => {
    await expectDefsToolWorks(srv, client);
  });

  it('svc_session: the turn after a call, whole or cut by max_tokens (dropped), continues the context', async () => {
    const body = { model: '', messages: USER, tools: TOOLS, tool_choice: 'required' as const, parallel_tool_calls: true, temperature: 0 };
    const whole = await client.chat.completions.create({ ...body, max_tokens: 200 });
    const n = whole.usage!.completion_tokens;
    // Whole calls, then the last one cut, then every call cut (nothing but dropped call syntax).
    for (const [i, max_tokens] of [200, Math.ceil(n / 2), 3].entries()) {
      const session = `tool-turn-${i}`;
      const first = await postJson(`${srv.url}/v1/chat/completions`, { ...body, max_tokens, svc_session: session });
      expect(first.status).toBe(200);
      const msg = first.json.choices[0].message;
      const results = (msg.tool_calls ?? []).map((c: { id: string }) => ({ role: 'tool', tool_call_id: c.id, content: '{"forecast": "sunny"}' }));
      const messages = [...USER, { role: 'assistant', content: msg.content ?? '', ...(msg.tool_calls ? { tool_calls: msg.tool_calls } : {}) }, ...results, { role: 'user', content: 'And in Rome?' }];
      // It was a 400 "holds N tokens and the prompt diverges": the context held call syntax the client never got back.
      const next = await postJson(`${srv.url}/v1/chat/completions`, { model: '', messages, tools: TOOLS, max_tokens: 4, temperature: 0, svc_session: session });
      expect([i, next.status, next.json.error]).toEqual([i, 200, undefined]);
      expect(next.json.usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(first.json.usage.prompt_tokens - 1);
      const alone = await postJson(`${srv.url}/v1/chat/completions`, { model: '', messages, tools: TOOLS, max_tokens: 4, temperature: 0, svc_retain_prefix: false });
      expect(next.json.choices[0].message).toEqual(alone.json.choices[0].message);
    }
  });

  it('svc_session: a turn that continued a prefill goes on (the prefill and its continuation tokenize otherwise together)', async () => {
    const session = `prefill-${Date.now()}`;
    const ask = (messages: unknown[], extra: Record<string, unknown> = {}) => postJson(`${srv.url}/v1/messages`, { model: '', max_tokens: 12, temperature: 0, messages, ...extra });
    const start = [{ role: 'user', content: 'hello there' }, { role: 'assistant', content: 'Sure,' }];
    const first = await ask(start, { svc_session: session });
    expect(first.status).toBe(200);
    const next = [{ role: 'user', content: 'hello there' }, { role: 'assistant', content: 'Sure,' + first.json.content[0].text }, { role: 'user', content: 'again' }];
    const second = await ask(next, { svc_session: session });
    // It was a 400 "holds N tokens and the prompt diverges".
    expect([second.status, second.json.error]).toEqual([200, undefined]);
    expect(second.json.usage.cache_read_input_tokens).toBeGreaterThan(5);
    expect(second.json.content).toEqual((await ask(next, { svc_retain_prefix: false })).json.content);
  });

  it('an earlier call whose arguments are no JSON is taken, as the API takes any string (it was a 400 from the template code)', async () => {
    const turn = (args: string): OpenAI.Chat.ChatCompletionMessageParam[] => [
      ...USER,
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: args } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
    ];
    const counts: number[] = [];
    for (const args of ['not json', '', '{}']) {
      const r = await client.chat.completions.create({ model: '', tools: TOOLS, messages: turn(args), max_tokens: 1, svc_retain_prefix: false } as any);
      counts.push(r.usage!.prompt_tokens);
    }
    expect(counts[0]).toBeGreaterThan(counts[2]);
    expect(counts[1]).toBe(counts[2]);
  });

  it('an earlier call with arguments as an object, or none, is taken; a malformed call is a 400, never a 500', async () => {
    const turn = (call: unknown) => [...USER, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: 'c1', content: 'sunny' }];
    const fn = (f: unknown) => ({ id: 'c1', type: 'function', function: f });
    const asText = await postJson(`${srv.url}/v1/chat/completions`, { tools: TOOLS, messages: turn(fn({ name: 'get_weather', arguments: '{"city":"Paris","days":3}' })), max_tokens: 1, svc_retain_prefix: false });
    const asObject = await postJson(`${srv.url}/v1/chat/completions`, { tools: TOOLS, messages: turn(fn({ name: 'get_weather', arguments: { city: 'Paris', days: 3 } })), max_tokens: 1, svc_retain_prefix: false });
    expect([asText.status, asObject.status]).toEqual([200, 200]);
    expect(asObject.json.usage.prompt_tokens).toBe(asText.json.usage.prompt_tokens);
    const empty = await postJson(`${srv.url}/v1/chat/completions`, { tools: TOOLS, messages: turn(fn({ name: 'get_time', arguments: '' })), max_tokens: 1, svc_retain_prefix: false });
    for (const f of [{ name: 'get_time' }, { name: 'get_time', arguments: null }]) {
      const r = await postJson(`${srv.url}/v1/chat/completions`, { tools: TOOLS, messages: turn(fn(f)), max_tokens: 1, svc_retain_prefix: false });
      expect([r.status, r.json.usage?.prompt_tokens]).toEqual([200, empty.json.usage.prompt_tokens]);
    }
    // They were 500s ("args.trim is not a function", "reading 'name'").
    for (const call of [fn({}), fn({ name: 'f', arguments: 5 }), fn({ name: 'f', arguments: [1] }), { id: 'c1', type: 'function' }, 'x', null, { ...fn({ name: 'f', arguments: '{}' }), type: 'custom' }]) {
      for (const route of ['/v1/chat/completions', '/v1/contexts']) {
        const r = await postJson(`${srv.url}${route}`, { model: '', tools: TOOLS, messages: turn(call), max_tokens: 1 });
        expect([r.status, r.json.error?.message]).toEqual([400, expect.stringMatching(/^cannot parse request: messages\[1\]\.tool_calls\[0\]/)]);
      }
    }
  });

  it('messages: a prefill with a required call is refused by name (chat has no prefill: a call follows)', async () => {
    // It was "invalid grammar: std::exception".
    const message = 'a final assistant message (a prefill the reply continues) cannot be combined with a required tool call (tool_choice required, any or a named tool)';
    const prefill = [...USER, { role: 'assistant' as const, content: 'Sure' }];
    const tools = TOOLS.map((t) => ({ name: (t as OpenAI.Chat.ChatCompletionFunctionTool).function.name, input_schema: (t as OpenAI.Chat.ChatCompletionFunctionTool).function.parameters }));
    for (const tool_choice of [{ type: 'any' }, { type: 'tool', name: 'get_time' }]) {
      const m = await postJson(`${srv.url}/v1/messages`, { model: '', max_tokens: 50, messages: prefill, tools, tool_choice });
      expect([m.status, m.json.error?.message]).toEqual([400, message]);
    }
    const auto = await postJson(`${srv.url}/v1/messages`, { model: '', max_tokens: 5, messages: prefill, tools, tool_choice: { type: 'auto' } });
    expect(auto.status).toBe(200);
    // An empty final assistant message is no prefill.
    const empty = await postJson(`${srv.url}/v1/messages`, { model: '', max_tokens: 200, temperature: 0, messages: [...USER, { role: 'assistant', content: '' }], tools, tool_choice: { type: 'any', disable_parallel_tool_use: true } });
    expect([empty.status, empty.json.stop_reason]).toEqual([200, 'tool_use']);
    // The chat dialect renders a final assistant message as history and answers in a new turn.
    expectValidCall(await client.chat.completions.create({ model: '', messages: prefill, tools: TOOLS, tool_choice: 'required', max_tokens: 200, temperature: 0 }));
  });

  it('refuses a malformed tool or tool_choice', async () => {
    const bad = await postJson(`${srv.url}/v1/chat/completions`, { messages: USER, tools: [{ type: 'function' }] });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/^cannot parse request: tools\[0\]/);
    const choice = await postJson(`${srv.url}/v1/chat/completions`, { messages: USER, tools: TOOLS, tool_choice: 'sometimes' });
    expect(choice.status).toBe(400);
    expect(choice.json.error.message).toMatch(/^tool_choice must be auto, none, required or a named function/);
    // A call required with nothing to call: it answered 200 with free text.
    const none = 'a required tool call (tool_choice required or any) needs tools, and the request has none';
    for (const tools of [undefined, []]) {
      const r = await postJson(`${srv.url}/v1/chat/completions`, { messages: USER, tools, tool_choice: 'required', max_tokens: 4 });
      expect([r.status, r.json.error?.message]).toEqual([400, none]);
    }
    const any = await postJson(`${srv.url}/v1/messages`, { model: '', max_tokens: 4, messages: USER, tool_choice: { type: 'any' } });
    expect([any.status, any.json.error?.message]).toEqual([400, none]);
    // auto and none need no tools.
    for (const tool_choice of ['auto', 'none']) {
      expect((await postJson(`${srv.url}/v1/chat/completions`, { messages: USER, tool_choice, max_tokens: 4 })).status).toBe(200);
    }
  });
});

/** qwen2-tiny's template has no tool format: the forced call goes through the JSON-call fallback. */
describe('forced tool calls without a template tool format (synthetic qwen2-tiny)', () => {
  let srv: RunningServer;
  let client: OpenAI;

  beforeAll(async () => {
    srv = await startServer(['-m', syntheticModel('qwen2-tiny'), '-threads', '2']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
  }, 600_000);
  afterAll(async () => {
    await srv?.stop();
  });

  it('tool_choice required and a named function yield valid calls', async () => {
    for (const seed of [1, 2]) {
      expectValidCall(await client.chat.completions.create({ model: '', messages: USER, tools: TOOLS, tool_choice: 'required', max_tokens: 200, temperature: 1, seed }));
    }
    const named = await client.chat.completions.create({ model: '', messages: USER, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'get_time' } }, max_tokens: 200, temperature: 0 });
    expectValidCall(named, 'get_time');
    const final = await client.chat.completions.stream({ model: '', messages: USER, tools: TOOLS, tool_choice: 'required', max_tokens: 200, temperature: 0 }).finalChatCompletion();
    expect(final.choices[0].finish_reason).toBe('tool_calls');
    expect(final.choices[0].message.tool_calls).toHaveLength(1);
  });

  it('parameters with $defs and $ref (a pydantic nested model) give valid calls', async () => {
    await expectDefsToolWorks(srv, client);
  });
});
