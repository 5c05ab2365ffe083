import { fixtureModel, STORIES } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(120_000);

/**
 * A request bound to a context whose prompt departs from it in its last tokens cuts the
 * context to the common prefix. When that request never runs (429 with the queue full, or
 * its client gone while it waited), the context must still hold one KV cell per token:
 * its snapshot and export restore, and it continues like a fresh request.
 */
describe('contexts: bound requests that never run', () => {
  let srv: RunningServer;

  beforeAll(async () => {
    // One sequence generates at a time and one request may wait: a long stream holds the engine.
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '1', '-concurrency', '1', '-queue', '1']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  const complete = async (body: Record<string, unknown>) => {
    const r = await postJson(`${srv.url}/v1/completions`, { temperature: 0, max_tokens: 12, ...body });
    expect(r.status).toBe(200);
    return r.json.choices[0].text as string;
  };

  /** The text with its last three words replaced: it departs from the context in its last tokens. */
  const departing = (text: string) => {
    let at = text.length;
    for (let i = 0; i < 3; i++) at = text.lastIndexOf(' ', at - 1);
    return text.slice(0, at) + ' zebra';
  };

  /** A context holding a prompt and a greedy continuation, and that text. */
  const contextWithTurn = async () => {
    const ctx = (await postJson(`${srv.url}/v1/contexts`, { prompt: 'Once upon a time' })).json;
    const text = 'Once upon a time' + (await complete({ prompt: 'Once upon a time', svc_session: ctx.id }));
    return { id: ctx.id as string, text };
  };

  /** A streamed request that keeps the engine busy until aborted. */
  const hog = () => {
    const ac = new AbortController();
    const body = JSON.stringify({ prompt: 'Lily', max_tokens: 4000, ignore_eos: true, stream: true, temperature: 0 });
    const started = fetch(`${srv.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: ac.signal })
      .then((r) => r.body?.getReader().read())
      .catch(() => undefined);
    return { started, stop: () => ac.abort() };
  };

  const postFile = async (path: string, file: Buffer) => {
    const r = await fetch(`${srv.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: file });
    return { status: r.status, json: (await r.json()) as any };
  };

  const tokensOf = async (id: string) => ((await (await fetch(`${srv.url}/v1/contexts/${id}`)).json()) as { tokens: number }).tokens;

  /** Snapshot → restore and export → import both succeed, and the restored copy continues like the original. */
  const expectWhole = async (id: string, prompt: string) => {
    const snap = Buffer.from(await (await fetch(`${srv.url}/v1/contexts/${id}/snapshot`)).arrayBuffer());
    const restored = await postFile('/v1/contexts/restore', snap);
    expect(restored.json?.error?.message ?? '').toBe('');
    expect(restored.status).toBe(201);
    expect(restored.json.tokens).toBe(await tokensOf(id));
    const exported = Buffer.from(await (await fetch(`${srv.url}/v1/contexts/${id}/export`)).arrayBuffer());
    const imported = await postFile('/v1/contexts/import', exported);
    expect(imported.status).toBe(201);
    const fresh = await complete({ prompt, svc_retain_prefix: false });
    expect(await complete({ prompt, svc_session: restored.json.id })).toBe(fresh);
    expect(await complete({ prompt, svc_session: id })).toBe(fresh);
  };

  it('a bound request refused with 429 leaves its context whole', async () => {
    const { id, text } = await contextWithTurn();
    const before = await tokensOf(id);
    const running = hog();
    await running.started; // the hog is generating
    const queued = hog(); // and one more waits: the queue is full
    await new Promise((r) => setTimeout(r, 200));
    const diverging = departing(text);
    const refused = await postJson(`${srv.url}/v1/completions`, { prompt: diverging, max_tokens: 4, svc_session: id });
    expect(refused.status).toBe(429);
    running.stop();
    queued.stop();
    expect(await tokensOf(id)).toBeLessThan(before); // cut to the common prefix
    await expectWhole(id, diverging);
  });

  it('a bound request whose client left while it waited leaves its context whole', async () => {
    const { id, text } = await contextWithTurn();
    const running = hog();
    await running.started;
    const diverging = departing(text);
    const before = await tokensOf(id);
    const ac = new AbortController();
    const waiting = fetch(`${srv.url}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, signal: ac.signal,
      body: JSON.stringify({ prompt: diverging, max_tokens: 4, temperature: 0, svc_session: id, stream: true }),
    }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 300));
    ac.abort();
    await waiting;
    // The context is free again once the scheduler let the abandoned request go.
    for (let i = 0; i < 50; i++) {
      const r = await fetch(`${srv.url}/v1/contexts/${id}/snapshot`);
      await r.arrayBuffer();
      if (r.status === 200) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    running.stop();
    expect(await tokensOf(id)).toBeLessThan(before);
    await expectWhole(id, diverging);
  });
});
