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
 * Streaming chains: a batch of decoding sequences decodes on natively and hands
 * its tokens to JS as it goes (SVC_STREAM_MS; on by default when the KV cache is
 * on a GPU or decode threads leave a CPU free). Everything JS decides mid-chain
 * (a stop string, a client leaving, a new request, max_tokens) must land exactly
 * as on the plain path.
 */
describe('streaming decode chains', () => {
  let plain: RunningServer;
  let streamed: RunningServer;
  beforeAll(async () => {
    const args = ['-m', fixtureModel(STORIES), '-threads', '1', '-concurrency', '4', '-cache-slots', '0'];
    plain = await startServer(args, { env: { SVC_PIPELINE: '0', SVC_STREAM_MS: '-1', SVC_CHAIN_STEPS: '1' } });
    streamed = await startServer(args, { env: { SVC_STREAM_MS: '0' } });
  });
  afterAll(async () => {
    await Promise.all([plain?.stop(), streamed?.stop()]);
  });

  it('concurrent greedy streams give the same text and logprobs as one step per call, tokens handed over mid-chain', async () => {
    const body = (prompt: string) => ({ prompt, max_tokens: 300, ignore_eos: true, logprobs: 2 });
    const want = await Promise.all(PROMPTS.map((p) => complete(plain, body(p))));
    const before = await stats(streamed);
    const got = await Promise.all(PROMPTS.map((p) => complete(streamed, body(p))));
    got.forEach((r, i) => {
      expect(r.choices[0].text).toBe(want[i].choices[0].text);
      expect(r.choices[0].logprobs.tokens).toEqual(want[i].choices[0].logprobs.tokens);
      expect(r.usage.completion_tokens).toBe(300);
    });
    const after = await stats(streamed);
    expect(after.streamed_steps - before.streamed_steps).toBeGreaterThan(100);
    expect((await stats(plain)).streamed_steps).toBe(0);
  });

  it('a stop string met mid-chain ends that stream exactly there; the KV cache keeps only what was kept', async () => {
    const full = (await complete(plain, { prompt: PROMPTS[0], max_tokens: 200, ignore_eos: true })).choices[0].text;
    const stop = full.slice(120, 128);
    const cut = full.indexOf(stop);
    const [stopped, other] = await Promise.all([
      complete(streamed, { prompt: PROMPTS[0], max_tokens: 200, stop: [stop] }),
      complete(streamed, { prompt: PROMPTS[1], max_tokens: 200, ignore_eos: true }),
    ]);
    expect(stopped.choices[0].text).toBe(full.slice(0, cut));
    expect(stopped.choices[0].finish_reason).toBe('stop');
    expect(other.choices[0].text).toBe((await complete(plain, { prompt: PROMPTS[1], max_tokens: 200, ignore_eos: true })).choices[0].text);
    expect((await complete(streamed, { prompt: PROMPTS[0], max_tokens: 200, stop: [stop] })).choices[0].text).toBe(full.slice(0, cut));
  });

  it('a request arriving mid-chain joins at once; max_tokens ends each stream at its count', async () => {
    const long = complete(streamed, { prompt: PROMPTS[0], max_tokens: 1500, ignore_eos: true });
    await new Promise((r) => setTimeout(r, 100));
    const t0 = performance.now();
    const short = await complete(streamed, { prompt: PROMPTS[1], max_tokens: 3, ignore_eos: true });
    // It did not wait for the long one's chain (up to 1024 steps) to end.
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(short.usage.completion_tokens).toBe(3);
    const outs = await Promise.all([5, 17, 64].map((n, i) => complete(streamed, { prompt: PROMPTS[i + 1], max_tokens: n, ignore_eos: true })));
    expect(outs.map((o) => o.usage.completion_tokens)).toEqual([5, 17, 64]);
    expect((await long).usage.completion_tokens).toBe(1500);
  });

  it('a client that leaves mid-stream frees its sequence; the others finish', async () => {
    const client = new OpenAI({ baseURL: `${streamed.url}/v1`, apiKey: 'x' });
    const ac = new AbortController();
    const stream = await client.completions.create({ model: '', prompt: PROMPTS[2], max_tokens: 1500, ignore_eos: true, stream: true } as any, { signal: ac.signal });
    const other = complete(streamed, { prompt: PROMPTS[3], max_tokens: 400, ignore_eos: true });
    let chunks = 0;
    try {
      for await (const _ of stream as any) if (++chunks === 20) ac.abort();
    } catch {
      // aborted
    }
    expect((await other).usage.completion_tokens).toBe(400);
    for (let i = 0; i < 50 && (await stats(streamed)).active > 0; i++) await new Promise((r) => setTimeout(r, 20));
    const s = await stats(streamed);
    expect(s.active).toBe(0);
    expect(s.cancelled).toBeGreaterThan(0);
  });
});
