import { fixtureModel, STORIES } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

const PROMPTS = ['Once upon a time', 'The little dog', 'One day, a girl named Sue', 'Tom and his mom went'];

async function stats(srv: RunningServer): Promise<any> {
  return (await fetch(`${srv.url}/v1/stats`)).json();
}

const complete = async (srv: RunningServer, body: Record<string, unknown>) => {
  const r = await postJson(`${srv.url}/v1/completions`, { temperature: 0, ...body });
  expect(r.status).toBe(200);
  return r.json as { choices: { text: string; finish_reason: string }[]; usage: { completion_tokens: number } };
};

/**
 * A decoding batch's next native chain starts before JS handles the last one's
 * tokens (on by default when the KV cache is on a GPU or decode threads leave a
 * CPU free; SVC_PIPELINE forces it). The text must be what the plain path gives.
 */
describe('pipelined decode chains', () => {
  let plain: RunningServer;
  let piped: RunningServer;
  beforeAll(async () => {
    const args = ['-m', fixtureModel(STORIES), '-threads', '1', '-concurrency', '4', '-cache-slots', '0'];
    plain = await startServer(args, { env: { SVC_PIPELINE: '0', SVC_STREAM_MS: '-1', SVC_CHAIN_MS: '2', SVC_CHAIN_STEPS: '8' } });
    piped = await startServer(args, { env: { SVC_PIPELINE: '1', SVC_STREAM_MS: '-1', SVC_CHAIN_MS: '2', SVC_CHAIN_STEPS: '8' } });
  });
  afterAll(async () => {
    await Promise.all([plain?.stop(), piped?.stop()]);
  });

  it('concurrent greedy streams give the same text as without pipelining, and chains were pipelined', async () => {
    const body = (prompt: string) => ({ prompt, max_tokens: 300, ignore_eos: true });
    const want = await Promise.all(PROMPTS.map((p) => complete(plain, body(p))));
    const before = await stats(piped);
    const got = await Promise.all(PROMPTS.map((p) => complete(piped, body(p))));
    got.forEach((r, i) => {
      expect(r.choices[0].text).toBe(want[i].choices[0].text);
      expect(r.usage.completion_tokens).toBe(300);
    });
    expect((await stats(piped)).pipelined_chains).toBeGreaterThan(before.pipelined_chains);
    expect((await stats(plain)).pipelined_chains).toBe(0);
  });

  it('a stop string met mid-chain ends that stream exactly where it should, the others go on', async () => {
    const full = (await complete(plain, { prompt: PROMPTS[0], max_tokens: 200, ignore_eos: true })).choices[0].text;
    // a stop string well inside the text
    const stop = full.slice(120, 128);
    const cut = full.indexOf(stop);
    const [stopped, other] = await Promise.all([
      complete(piped, { prompt: PROMPTS[0], max_tokens: 200, stop: [stop] }),
      complete(piped, { prompt: PROMPTS[1], max_tokens: 200, ignore_eos: true }),
    ]);
    expect(stopped.choices[0].text).toBe(full.slice(0, cut));
    expect(stopped.choices[0].finish_reason).toBe('stop');
    expect(other.choices[0].text).toBe((await complete(plain, { prompt: PROMPTS[1], max_tokens: 200, ignore_eos: true })).choices[0].text);
    // The KV cache holds exactly what was kept: the same prompt again gives the same text.
    expect((await complete(piped, { prompt: PROMPTS[0], max_tokens: 200, stop: [stop] })).choices[0].text).toBe(full.slice(0, cut));
  });

  it('max_tokens and a context operation waiting do not lose or add tokens', async () => {
    const ctxReq = postJson(`${piped.url}/v1/contexts`, { model: '', prompt: 'Once upon a time there was' });
    const outs = await Promise.all([5, 17, 64, 129].map((n, i) => complete(piped, { prompt: PROMPTS[i], max_tokens: n, ignore_eos: true })));
    expect(outs.map((o) => o.usage.completion_tokens)).toEqual([5, 17, 64, 129]);
    expect((await ctxReq).status).toBe(201);
  });
});
