import OpenAI from 'openai';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

const PROMPTS = ['Once upon a time', 'The little dog', 'One day, a girl named Sue', 'Tom and his mom went'];

async function stats(srv: RunningServer): Promise<any> {
  return (await fetch(`${srv.url}/v1/stats`)).json();
}

const complete = async (srv: RunningServer, body: Record<string, unknown>) => {
  const r = await postJson(`${srv.url}/v1/completions`, { temperature: 0, ...body });
  expect({ status: r.status, body: r.status === 200 ? '' : r.text }).toEqual({ status: 200, body: '' });
  return r.json as { choices: { text: string; finish_reason: string; logprobs: any }[]; usage: { completion_tokens: number } };
};

/**
 * The two ways a batch of decoding sequences runs ahead of JS, against the plain
 * path (one step per native call):
 * - pipelined chains: the next native chain starts before JS handles the last
 *   one's tokens (SVC_PIPELINE);
 * - streaming chains: the engine decodes on and hands tokens to JS as it goes
 *   (SVC_STREAM_MS; the default when the KV cache is on a GPU or decode threads
 *   leave a CPU free).
 * Everything JS decides mid-chain (a stop string, a client leaving, a new
 * request, max_tokens, a context operation) must land exactly as on the plain path.
 */
describe.each([
  ['pipelined chains', { SVC_PIPELINE: '1', SVC_STREAM_MS: '-1', SVC_CHAIN_MS: '2', SVC_CHAIN_STEPS: '8' }, 'pipelined_chains'],
  ['streaming chains', { SVC_STREAM_MS: '0' }, 'streamed_steps'],
])('%s', (_name, env, counter) => {
  let plain: RunningServer;
  let ahead: RunningServer;
  beforeAll(async () => {
    const args = ['-m', fixtureModel(STORIES), '-threads', '1', '-concurrency', '4', '-cache-slots', '0'];
    plain = await startServer(args, { env: { SVC_PIPELINE: '0', SVC_STREAM_MS: '-1', SVC_CHAIN_STEPS: '1' } });
    ahead = await startServer(args, { env });
  });
  afterAll(async () => {
    await Promise.all([plain?.stop(), ahead?.stop()]);
  });

  it('concurrent greedy streams give the same text and logprobs as one step per call', async () => {
    const body = (prompt: string) => ({ prompt, max_tokens: 300, ignore_eos: true, logprobs: 2 });
    const want = await Promise.all(PROMPTS.map((p) => complete(plain, body(p))));
    const before = await stats(ahead);
    const got = await Promise.all(PROMPTS.map((p) => complete(ahead, body(p))));
    got.forEach((r, i) => {
      expect(r.choices[0].text).toBe(want[i].choices[0].text);
      expect(r.choices[0].logprobs.tokens).toEqual(want[i].choices[0].logprobs.tokens);
      expect(r.usage.completion_tokens).toBe(300);
    });
    expect((await stats(ahead))[counter]).toBeGreaterThan(before[counter]);
    expect((await stats(plain))[counter]).toBe(0);
  });

  it('a stop string met mid-chain ends that stream exactly there, the others go on; the KV cache keeps only what was kept', async () => {
    const full = (await complete(plain, { prompt: PROMPTS[0], max_tokens: 200, ignore_eos: true })).choices[0].text;
    const stop = full.slice(120, 128);
    const cut = full.indexOf(stop);
    const [stopped, other] = await Promise.all([
      complete(ahead, { prompt: PROMPTS[0], max_tokens: 200, stop: [stop] }),
      complete(ahead, { prompt: PROMPTS[1], max_tokens: 200, ignore_eos: true }),
    ]);
    expect(stopped.choices[0].text).toBe(full.slice(0, cut));
    expect(stopped.choices[0].finish_reason).toBe('stop');
    expect(other.choices[0].text).toBe((await complete(plain, { prompt: PROMPTS[1], max_tokens: 200, ignore_eos: true })).choices[0].text);
    // The same prompt again gives the same text.
    expect((await complete(ahead, { prompt: PROMPTS[0], max_tokens: 200, stop: [stop] })).choices[0].text).toBe(full.slice(0, cut));
  });

  it('max_tokens and a context operation waiting do not lose or add tokens', async () => {
    const ctxReq = postJson(`${ahead.url}/v1/contexts`, { model: '', prompt: 'Once upon a time there was' });
    const outs = await Promise.all([5, 17, 64, 129].map((n, i) => complete(ahead, { prompt: PROMPTS[i], max_tokens: n, ignore_eos: true })));
    expect(outs.map((o) => o.usage.completion_tokens)).toEqual([5, 17, 64, 129]);
    expect((await ctxReq).status).toBe(201);
  });

  it('a context whose generation just ended can be deleted at once (done comes once its KV is settled)', async () => {
    // Decode threads on every CPU: the engine thread then competes with JS and the
    // end of its chain can come well after the last tokens were handed over.
    const busy = await startServer(['-m', fixtureModel(STORIES), '-threads', '2', '-concurrency', '4'], { env });
    try {
      for (let i = 0; i < 8; i++) {
        const prompt = PROMPTS[i % PROMPTS.length];
        const c = await postJson(`${busy.url}/v1/contexts`, { model: '', prompt });
        expect(c.status).toBe(201);
        const r = await complete(busy, { prompt: `${prompt} and`, svc_session: c.json.id, max_tokens: 24, svc_retain_prefix: false });
        expect(r.usage.completion_tokens).toBeGreaterThan(0);
        expect((await fetch(`${busy.url}/v1/contexts/${c.json.id}`, { method: 'DELETE' })).status).toBe(204);
      }
    } finally {
      await busy.stop();
    }
  });

  it('a request arriving mid-chain joins at once', async () => {
    const long = complete(ahead, { prompt: PROMPTS[0], max_tokens: 1500, ignore_eos: true });
    await new Promise((r) => setTimeout(r, 100));
    const t0 = performance.now();
    const short = await complete(ahead, { prompt: PROMPTS[1], max_tokens: 3, ignore_eos: true });
    // It did not wait for the long one's chain (a streaming chain runs up to 1024 steps) to end.
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(short.usage.completion_tokens).toBe(3);
    expect((await long).usage.completion_tokens).toBe(1500);
  });

  it('a client that leaves mid-stream frees its sequence; the others finish', async () => {
    const client = new OpenAI({ baseURL: `${ahead.url}/v1`, apiKey: 'x' });
    const ac = new AbortController();
    const stream = await client.completions.create({ model: '', prompt: PROMPTS[2], max_tokens: 1500, ignore_eos: true, stream: true } as any, { signal: ac.signal });
    const other = complete(ahead, { prompt: PROMPTS[3], max_tokens: 400, ignore_eos: true });
    let chunks = 0;
    try {
      for await (const _ of stream as any) if (++chunks === 20) ac.abort();
    } catch {
      // aborted
    }
    expect((await other).usage.completion_tokens).toBe(400);
    for (let i = 0; i < 50 && (await stats(ahead)).active > 0; i++) await new Promise((r) => setTimeout(r, 20));
    const s = await stats(ahead);
    expect(s.active).toBe(0);
    expect(s.cancelled).toBeGreaterThan(0);
  });
});
