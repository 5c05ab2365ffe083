/**
 * Fields clients send as null or empty, on every dialect: null means absent, a null where an
 * object belongs is a 400 naming it (these were 500s), and an empty final assistant message asks
 * for a plain reply rather than dropping the assistant turn.
 */
import { fixtureModel, STORIES, syntheticModel } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

describe('null and empty fields', () => {
  let chatSrv: RunningServer; // qwen2-tiny: a chat template with tools
  let stories: RunningServer; // no template: the fallback; greedy text is known
  beforeAll(async () => {
    [chatSrv, stories] = await Promise.all([
      startServer(['-m', syntheticModel('qwen2-tiny'), '-threads', '1']),
      startServer(['-m', fixtureModel(STORIES), '-threads', '1']),
    ]);
  });
  afterAll(async () => {
    await Promise.all([chatSrv?.stop(), stories?.stop()]);
  });
  const user = [{ role: 'user', content: 'hi' }];

  it('a null tool or content block is a 400 naming it, on every dialect', async () => {
    const cases: Array<[string, unknown, string]> = [
      ['/v1/messages', { max_tokens: 2, tools: [null], messages: user }, 'cannot parse request: tools[0] must be an object with name and input_schema'],
      ['/v1/messages/count_tokens', { tools: [null], messages: user }, 'cannot parse request: tools[0] must be an object with name and input_schema'],
      [
        '/v1/messages',
        {
          max_tokens: 2,
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: {} }] },
            { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [null] }] },
          ],
        },
        'cannot parse request: messages[2].content[0].content[0] must be a content block',
      ],
      ['/v1/chat/completions', { max_tokens: 2, tools: [null], messages: user }, 'cannot parse request: tools[0] must be {type: "function", function: {name, parameters}}'],
      ['/v1/responses', { max_output_tokens: 2, tools: [null], input: 'hi' }, 'cannot parse request: tools[0] must be an object'],
    ];
    for (const [path, body, message] of cases) {
      const r = await postJson(`${chatSrv.url}${path}`, body);
      expect([path, r.status]).toEqual([path, 400]);
      expect(r.json).toEqual({ error: { message, type: 'Bad Request' } });
    }
    const runner = await postJson(`${chatSrv.url}/api/chat`, { stream: false, tools: [null], messages: user });
    expect(runner.json).toEqual({ error: 'cannot parse request: tools[0] must be {type: "function", function: {name, parameters}}' });
  });

  it("a tool's null description, type and tool_choice.type are absent", async () => {
    const m = await postJson(`${chatSrv.url}/v1/messages`, {
      max_tokens: 2,
      tools: [{ name: 'f', description: null, type: null, input_schema: { type: 'object' } }],
      tool_choice: { type: null },
      messages: user,
    });
    expect(m.status).toBe(200);
    const fn = { name: 'f', description: null, parameters: { type: 'object' } };
    const o = await postJson(`${chatSrv.url}/v1/chat/completions`, { max_tokens: 2, tools: [{ type: 'function', function: fn }], messages: user });
    expect(o.status).toBe(200);
    const r = await postJson(`${chatSrv.url}/api/chat`, { stream: false, options: { num_predict: 2 }, tools: [{ type: null, function: fn }], messages: user });
    expect(r.status).toBe(200);
    // Another type is still a 400 naming the field (it reached llama.cpp's template code before).
    const bad = await postJson(`${chatSrv.url}/v1/chat/completions`, { max_tokens: 2, tools: [{ type: 'function', function: { ...fn, description: 5 } }], messages: user });
    expect(bad.json.error.message).toBe('cannot parse request: tools[0].function.description must be a string');
  });

  it('options.num_predict null is the default (512), not 1 token', async () => {
    const ask = (num_predict: number | null) => postJson(`${stories.url}/api/generate`, { stream: false, raw: true, prompt: 'Once upon a time', options: { num_predict, temperature: 0 } });
    const [r, explicit, short] = [await ask(null), await ask(512), await ask(16)];
    expect(r.json.eval_count).toBeGreaterThan(16);
    expect([r.json.eval_count, r.json.response]).toEqual([explicit.json.eval_count, explicit.json.response]);
    expect(short.json.eval_count).toBe(16);
  });

  it('seed null is no seed, on the local runner, chat completions and completions', async () => {
    const asks: Array<[string, object]> = [
      ['/api/generate', { stream: false, raw: true, prompt: 'Once', options: { num_predict: 2, seed: null } }],
      ['/v1/chat/completions', { max_tokens: 2, seed: null, messages: [{ role: 'user', content: 'hi' }] }],
      ['/v1/completions', { max_tokens: 2, seed: null, prompt: 'Once' }],
    ];
    for (const [path, body] of asks) expect([path, (await postJson(`${stories.url}${path}`, body)).status]).toEqual([path, 200]);
  });

  it('one generated token reports a positive eval_duration (clients divide by it)', async () => {
    const r = await postJson(`${stories.url}/api/generate`, { stream: false, raw: true, prompt: 'Once upon a time', options: { num_predict: 1 } });
    expect(r.json.eval_count).toBe(1);
    expect(r.json.eval_duration).toBeGreaterThan(0);
  });

  it('raw with images is refused, not sent without them', async () => {
    const r = await postJson(`${stories.url}/api/generate`, { stream: false, raw: true, prompt: 'describe', images: ['aGVsbG8='] });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'images need the chat template: send them without raw' });
  });

  it('an empty final assistant message is a plain reply, not a continuation of the user turn', async () => {
    const plain = await postJson(`${stories.url}/v1/messages`, { max_tokens: 8, temperature: 0, messages: [{ role: 'user', content: 'Once upon a time' }] });
    for (const empty of ['', []]) {
      const r = await postJson(`${stories.url}/v1/messages`, {
        max_tokens: 8,
        temperature: 0,
        messages: [{ role: 'user', content: 'Once upon a time' }, { role: 'assistant', content: empty }],
      });
      expect(r.json.content).toEqual(plain.json.content);
      // The same prompt (input_tokens leave out what the cache held: the sum is the prompt).
      const prompt = (u: { input_tokens: number; cache_read_input_tokens: number }) => u.input_tokens + u.cache_read_input_tokens;
      expect(prompt(r.json.usage)).toBe(prompt(plain.json.usage));
    }
  });
});
