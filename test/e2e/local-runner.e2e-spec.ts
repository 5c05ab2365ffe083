import { Ollama } from 'ollama';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(120_000);

const PROMPT = 'Once upon a time';
const GREEDY = { temperature: 0, num_predict: 16 };

describe('local-runner dialect on the real engine (stories260K)', () => {
  let srv: RunningServer;
  let ollama: Ollama;

  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
    ollama = new Ollama({ host: srv.url });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('generates, unstreamed and streamed, with the same text and nanosecond timings', async () => {
    const whole = await ollama.generate({ model: 'stories260K', prompt: PROMPT, stream: false, options: GREEDY });
    expect(whole.done).toBe(true);
    expect(whole.response!.length).toBeGreaterThan(0);
    expect(['stop', 'length']).toContain(whole.done_reason);
    expect(whole.eval_count).toBeGreaterThan(0);
    expect(whole.eval_count).toBeLessThanOrEqual(16);
    expect(whole.prompt_eval_count).toBeGreaterThan(0);
    // Nanoseconds: a real generation takes far more than 1000 ns, and the total covers prefill and decode.
    expect(whole.total_duration).toBeGreaterThan(1000);
    expect(whole.total_duration).toBeGreaterThanOrEqual(whole.eval_duration);
    expect(Number.isInteger(whole.eval_duration)).toBe(true);
    expect(new Date(whole.created_at as unknown as string).getTime()).not.toBeNaN();

    const parts = await ollama.generate({ model: 'stories260K', prompt: PROMPT, stream: true, options: GREEDY });
    let text = '';
    let last: any;
    let chunks = 0;
    for await (const p of parts) {
      chunks++;
      text += p.response;
      last = p;
    }
    expect(chunks).toBeGreaterThan(2);
    expect(text).toBe(whole.response);
    expect(last.done).toBe(true);
    expect(last.eval_count).toBe(whole.eval_count);
  });

  it('streams by default as NDJSON', async () => {
    const r = await fetch(`${srv.url}/api/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: '', prompt: PROMPT, options: { num_predict: 4 } }) });
    expect(r.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    const lines = (await r.text()).trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.length).toBeGreaterThan(1);
    expect(lines.slice(0, -1).every((l) => l.done === false)).toBe(true);
    expect(lines[lines.length - 1]).toMatchObject({ done: true, done_reason: 'length', eval_count: 4 });
  });

  it('raw generate continues the prompt as is', async () => {
    const raw = await ollama.generate({ model: '', prompt: PROMPT, raw: true, stream: false, options: GREEDY });
    const viaCompletions = await postJson(`${srv.url}/v1/completions`, { model: '', prompt: PROMPT, max_tokens: 16, temperature: 0 });
    expect(raw.response).toBe(viaCompletions.json.choices[0].text);
  });

  it('generate on a model without a chat template continues the prompt as is, as raw does (the runner\'s {{ .Prompt }})', async () => {
    const raw = await ollama.generate({ model: '', prompt: PROMPT, raw: true, stream: false, options: GREEDY });
    const plain = await ollama.generate({ model: '', prompt: PROMPT, system: 'ignored without a template', stream: false, options: GREEDY });
    expect(plain.response).toBe(raw.response);
    expect(plain.prompt_eval_count).toBe(raw.prompt_eval_count);
    // Chat keeps svc's fallback template: turns need roles.
    const chat = await ollama.chat({ model: '', messages: [{ role: 'user', content: PROMPT }], stream: false, options: GREEDY });
    expect(chat.prompt_eval_count).toBeGreaterThan(raw.prompt_eval_count);
  });

  it("answers generate with a context that continues the conversation, as a raw prompt of the whole text", async () => {
    const first = await ollama.generate({ model: '', prompt: PROMPT, stream: false, options: GREEDY });
    expect(first.context.length).toBeGreaterThan(first.prompt_eval_count);
    expect(first.context.every((t) => Number.isInteger(t) && t >= 0)).toBe(true);
    // Streamed, the final object carries the same context.
    let last: any;
    for await (const p of await ollama.generate({ model: '', prompt: PROMPT, stream: true, options: GREEDY })) last = p;
    expect(last.context).toEqual(first.context);
    const next = await ollama.generate({ model: '', prompt: ' The end.', context: first.context, stream: false, options: GREEDY });
    const raw = await ollama.generate({ model: '', prompt: `${PROMPT}${first.response} The end.`, raw: true, stream: false, options: GREEDY });
    expect(next.prompt_eval_count).toBe(raw.prompt_eval_count);
    expect(next.response).toBe(raw.response);
    expect(next.response!.length).toBeGreaterThan(0);
    // The local runner answers raw requests without one.
    expect(raw.context).toBeUndefined();
    const bad = await postJson(`${srv.url}/api/generate`, { model: '', prompt: 'x', context: [1, 99999999], stream: false });
    expect([bad.status, bad.json.error]).toEqual([400, expect.stringMatching(/^context holds 99999999, which is no token of stories260K/)]);
    const notInts = await postJson(`${srv.url}/api/generate`, { model: '', prompt: 'x', context: [1.5], stream: false });
    expect([notInts.status, notInts.json.error]).toEqual([400, 'cannot parse request: context: each value in context must be an integer number (got the array [1.5])']);
  });

  it('answers logprobs, streamed and not, as the raw-logit figures /v1/completions gives', async () => {
    const ask = { model: '', prompt: PROMPT, raw: true, options: { temperature: 0, num_predict: 8 }, logprobs: true, top_logprobs: 3 };
    const whole = await ollama.generate({ ...ask, stream: false });
    const lps = whole.logprobs!;
    expect(lps).toHaveLength(whole.eval_count);
    expect(lps.map((l) => l.token).join('')).toBe(whole.response);
    for (const l of lps) {
      expect(l.top_logprobs).toHaveLength(3);
      // Greedy: the chosen token is the likeliest.
      expect(l.top_logprobs![0]).toMatchObject({ token: l.token, logprob: l.logprob });
      expect(l.logprob).toBeLessThanOrEqual(0);
    }
    // Close, not equal: a prompt read from the prefix cache sums its floats in another order.
    const near = (a: number[], b: number[]) => expect(a.map((x, i) => Math.abs(x - b[i]) < 1e-3)).toEqual(a.map(() => true));
    const openai = await postJson(`${srv.url}/v1/completions`, { model: '', prompt: PROMPT, max_tokens: 8, temperature: 0, logprobs: 3 });
    expect(lps.map((l) => l.token)).toEqual(openai.json.choices[0].logprobs.tokens);
    near(lps.map((l) => l.logprob), openai.json.choices[0].logprobs.token_logprobs);
    let streamed: any[] = [];
    for await (const p of await ollama.generate({ ...ask, stream: true })) streamed = streamed.concat(p.logprobs ?? []);
    expect(streamed.map((l) => [l.token, l.top_logprobs.map((t: any) => t.token)])).toEqual(lps.map((l) => [l.token, l.top_logprobs!.map((t) => t.token)]));
    near(streamed.map((l) => l.logprob), lps.map((l) => l.logprob));
    // logprobs alone: no alternatives; on /api/chat too.
    const chat = await ollama.chat({ model: '', messages: [{ role: 'user', content: PROMPT }], stream: false, options: { temperature: 0, num_predict: 4 }, logprobs: true });
    expect(chat.logprobs).toHaveLength(chat.eval_count);
    expect(chat.logprobs!.every((l) => l.top_logprobs === undefined && Array.isArray((l as any).bytes))).toBe(true);
    const none = await ollama.generate({ model: '', prompt: PROMPT, stream: false, options: { num_predict: 2 } });
    expect(none.logprobs).toBeUndefined();
    const tooMany = await postJson(`${srv.url}/api/generate`, { model: '', prompt: PROMPT, stream: false, logprobs: true, top_logprobs: 21 });
    expect(tooMany.status).toBe(400);
  });

  it('chats, unstreamed and streamed', async () => {
    const messages = [{ role: 'user', content: PROMPT }];
    const whole = await ollama.chat({ model: 'stories260K', messages, stream: false, options: GREEDY });
    expect(whole.message.role).toBe('assistant');
    expect(whole.message.content.length).toBeGreaterThan(0);
    expect(whole.done).toBe(true);
    const parts = await ollama.chat({ model: 'stories260K', messages, stream: true, options: GREEDY });
    let text = '';
    for await (const p of parts) text += p.message.content;
    expect(text).toBe(whole.message.content);
  });

  it('constrains output with format json and a schema', async () => {
    const j = await ollama.generate({ model: '', prompt: PROMPT, format: 'json', stream: false, options: { temperature: 0, num_predict: 300 } });
    expect(() => JSON.parse(j.response!)).not.toThrow();
    const schema = { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['ok', 'n'], additionalProperties: false };
    const s = await ollama.chat({ model: '', messages: [{ role: 'user', content: PROMPT }], format: schema, stream: false, options: { temperature: 0, num_predict: 100 } });
    const parsed = JSON.parse(s.message.content);
    expect(typeof parsed.ok).toBe('boolean');
    expect(Number.isInteger(parsed.n)).toBe(true);
  });

  it('respects num_predict and seeds', async () => {
    const r = await ollama.generate({ model: '', prompt: PROMPT, stream: false, options: { num_predict: 5 } });
    expect(r.eval_count).toBeLessThanOrEqual(5);
    // The same text needs the same KV layout: each starts once the idle server has let go of the
    // last request's retained prompt, which these routes always keep (README: seeds and the shared KV).
    const settled = async () => {
      for (let i = 0; i < 100; i++) {
        const st = (await (await fetch(`${srv.url}/v1/stats`)).json()) as { prompt_cache: { resident: number } };
        if (st.prompt_cache.resident === 0) return;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error('retained prompts still resident after 2 s');
    };
    // 0, like a negative value, is no limit in the local runner (it gave an empty answer). Hundreds
    // of greedy tokens meet near-ties, so both start from the same (empty) KV as well.
    await settled();
    const unlimited = await ollama.generate({ model: '', prompt: PROMPT, stream: false, options: { temperature: 0, num_predict: -1 } });
    await settled();
    const zero = await ollama.generate({ model: '', prompt: PROMPT, stream: false, options: { temperature: 0, num_predict: 0 } });
    expect(unlimited.eval_count).toBeGreaterThan(16);
    expect([zero.response, zero.eval_count]).toEqual([unlimited.response, unlimited.eval_count]);
    const seeded = { temperature: 1, seed: 1234, num_predict: 24 };
    await settled();
    const a = await ollama.generate({ model: '', prompt: PROMPT, stream: false, options: seeded });
    await settled();
    const b = await ollama.generate({ model: '', prompt: PROMPT, stream: false, options: seeded });
    expect(a.response).toBe(b.response);
    const stopped = await ollama.generate({ model: '', prompt: PROMPT, stream: false, options: { ...GREEDY, num_predict: 40 } });
    const stop = stopped.response!.slice(6, 9);
    const c = await ollama.generate({ model: '', prompt: PROMPT, stream: false, options: { ...GREEDY, num_predict: 40, stop: [stop] } });
    expect(c.response).toBe(stopped.response!.slice(0, stopped.response!.indexOf(stop)));
    expect(c.done_reason).toBe('stop');
  });

  it('preloads with an empty prompt', async () => {
    const r = await ollama.generate({ model: 'stories260K', prompt: '', stream: false });
    expect(r).toMatchObject({ done: true, done_reason: 'load', response: '' });
  });

  it('lists tags, running models, model details and the version', async () => {
    const tags = await ollama.list();
    const t = tags.models.find((m) => m.name === 'stories260K')!;
    expect(t).toBeDefined();
    expect(t.model).toBe('stories260K');
    expect(t.size).toBeGreaterThan(0);
    expect(t.details.format).toBe('gguf');
    expect(t.details.family).toBe('llama');
    expect(new Date(t.modified_at as unknown as string).getTime()).not.toBeNaN();

    const ps = await ollama.ps();
    const p: any = ps.models.find((m) => m.name === 'stories260K');
    expect(p).toBeDefined();
    expect(p.digest).toBe('sha256:270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d');
    expect(p.context_length).toBeGreaterThan(0);
    expect(typeof p.size_vram).toBe('number');
    expect(new Date(p.expires_at).getTime()).not.toBeNaN();

    const show: any = await ollama.show({ model: 'stories260k:latest' });
    expect(show.details.family).toBe('llama');
    expect(show.capabilities).toEqual(['completion']);
    expect(show.model_info['general.architecture']).toBe('llama');
    expect(show.template).toBe('');
    expect(typeof show.modelfile).toBe('string');
    // As the local runner: arrays only with verbose, and no general.name.
    expect(show.model_info['tokenizer.ggml.tokens']).toBeNull();
    expect(show.model_info).not.toHaveProperty('general.name');
    const verbose: any = await ollama.show({ model: 'stories260K', verbose: true } as any);
    expect(verbose.model_info['tokenizer.ggml.tokens']).toHaveLength(512);
    expect(verbose.model_info['tokenizer.ggml.tokens'][1]).toBe('<s>');
    await expect(ollama.show({ model: 'no-such-model' })).rejects.toMatchObject({ status_code: 404 });
    const missing = await postJson(`${srv.url}/api/show`, { model: 'no-such-model' });
    expect(missing.status).toBe(404);
    expect(missing.json.error).toMatch(/^no model named no-such-model/);
    // An empty name is the default model (spec rule 1); none at all is the runner's 400.
    const byDefault = await postJson(`${srv.url}/api/show`, { model: '' });
    expect([byDefault.status, byDefault.json.model_info?.['general.architecture']]).toEqual([200, 'llama']);
    const none = await postJson(`${srv.url}/api/show`, {});
    expect([none.status, none.json.error]).toEqual([400, 'model is required']);

    expect(await ollama.version()).toEqual({ version: '0.3.0' });
  });

  it('answers plain-string errors, and embeddings without an encoder as 400', async () => {
    const e = await postJson(`${srv.url}/api/embed`, { model: 'stories260K', input: 'hi' });
    expect(e.status).toBe(400);
    expect(e.json).toEqual({ error: 'this server is serving stories260K, a decoder, and has no encoder loaded' });
    const e2 = await postJson(`${srv.url}/api/embeddings`, { model: 'stories260K', prompt: 'hi' });
    expect(e2.status).toBe(400);
    // A name nothing lists is the spec's 404, as on every route.
    for (const path of ['/api/embed', '/api/embeddings']) {
      const unknown = await postJson(`${srv.url}${path}`, { model: 'nonexistent', input: 'hi' });
      expect([unknown.status, unknown.json.error]).toEqual([404, expect.stringMatching(/^no model named nonexistent; available: /)]);
    }
    const empty = await postJson(`${srv.url}/api/chat`, { model: '', messages: [] });
    expect(empty.status).toBe(400);
    expect(empty.json).toEqual({ error: 'messages is empty' });
    const fmt = await postJson(`${srv.url}/api/generate`, { model: '', prompt: 'x', format: 'yaml' });
    expect(fmt.status).toBe(400);
    const img = await postJson(`${srv.url}/api/chat`, { model: '', stream: false, messages: [{ role: 'user', content: 'what is this', images: ['iVBORw0KGgo='] }] });
    expect(img.status).toBe(400);
    expect(typeof img.json.error).toBe('string');
  });
});
