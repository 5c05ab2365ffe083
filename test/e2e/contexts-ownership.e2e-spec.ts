import { fixtureModel, STORIES } from './helpers/fixtures';
import { RunningServer, startServer, aliceAndBobCallers } from './helpers/server';

jest.setTimeout(120_000);

describe('contexts belong to their caller', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '1', '-callers', aliceAndBobCallers()]);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  const call = (key: string, method: string, path: string, body?: unknown) =>
    fetch(`${srv.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });

  it("hides alice's context from bob (404, never 403) and lists only one's own", async () => {
    const made = await call('alice-key', 'POST', '/v1/contexts', { prompt: 'Once upon a time' });
    expect(made.status).toBe(201);
    const ctx: any = await made.json();
    for (const [m, p] of [
      ['GET', `/v1/contexts/${ctx.id}`],
      ['POST', `/v1/contexts/${ctx.id}/fork`],
      ['GET', `/v1/contexts/${ctx.id}/snapshot`],
      ['GET', `/v1/contexts/${ctx.id}/export`],
      ['DELETE', `/v1/contexts/${ctx.id}`],
    ] as const) {
      const r = await call('bob-key', m, p, m === 'POST' ? {} : undefined);
      expect(r.status).toBe(404);
    }
    expect(((await (await call('bob-key', 'GET', '/v1/contexts')).json()) as any).data).toEqual([]);
    expect(((await (await call('alice-key', 'GET', '/v1/contexts')).json()) as any).data.map((c: any) => c.id)).toEqual([ctx.id]);
    const exported = Buffer.from(await (await call('alice-key', 'GET', `/v1/contexts/${ctx.id}/export`)).arrayBuffer());
    const stolen = await fetch(`${srv.url}/v1/contexts/import`, { method: 'POST', headers: { authorization: 'Bearer bob-key', 'content-type': 'application/octet-stream' }, body: exported });
    expect(stolen.status).toBe(403);
    expect(((await stolen.json()) as any).error.message).toBe('the context belongs to another caller, or to you at another marking');
    const own = await fetch(`${srv.url}/v1/contexts/import`, { method: 'POST', headers: { authorization: 'Bearer alice-key', 'content-type': 'application/octet-stream' }, body: exported });
    expect(own.status).toBe(201);
  });

  it('gives each caller its own named sessions (svc_session) on every dialect, and continues only its own contexts', async () => {
    const ALICE = 'Once upon a time, there was a little girl named Lily.';
    const routes: Array<[string, (prompt: string, session: string) => unknown]> = [
      ['/v1/completions', (prompt, s) => ({ prompt, max_tokens: 1, temperature: 0, svc_session: s })],
      ['/v1/chat/completions', (prompt, s) => ({ messages: [{ role: 'user', content: prompt }], max_tokens: 1, temperature: 0, svc_session: s })],
      ['/v1/messages', (prompt, s) => ({ model: '', messages: [{ role: 'user', content: prompt }], max_tokens: 1, temperature: 0, svc_session: s })],
      ['/api/chat', (prompt, s) => ({ model: '', messages: [{ role: 'user', content: prompt }], stream: false, options: { num_predict: 1, temperature: 0 }, svc_session: s })],
      ['/api/generate', (prompt, s) => ({ model: '', prompt, stream: false, options: { num_predict: 1, temperature: 0 }, svc_session: s })],
    ];
    const before = ((await (await call('alice-key', 'GET', '/v1/contexts')).json()) as any).data.length;
    for (const [path, body] of routes) {
      const name = `ops${path.replace(/\//g, '-')}`;
      expect((await call('alice-key', 'POST', path, body(ALICE, name))).status).toBe(200);
      // The same name is bob's own session: a different prompt runs (it would not on alice's: her prompt is not its prefix).
      const bob = await call('bob-key', 'POST', path, body('zzz', name));
      expect([path, bob.status, bob.status === 200 ? '' : await bob.text()]).toEqual([path, 200, '']);
    }
    const alices = ((await (await call('alice-key', 'GET', '/v1/contexts')).json()) as any).data;
    const bobs = ((await (await call('bob-key', 'GET', '/v1/contexts')).json()) as any).data;
    expect(alices.length - before).toBe(routes.length);
    expect(bobs.length).toBe(routes.length);
    expect(bobs.filter((b: any) => alices.some((a: any) => a.id === b.id))).toEqual([]);

    // Alice continues a context she made, by id; bob naming that id gets the spec's 404 (another
    // caller's context does not exist for him), and her context is untouched.
    const made: any = await (await call('alice-key', 'POST', '/v1/contexts', { prompt: ALICE })).json();
    const mine: any = await (await call('alice-key', 'POST', '/v1/completions', { prompt: `${ALICE} She`, max_tokens: 1, temperature: 0, svc_session: made.id })).json();
    expect(mine.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
    const held = async () => ((await (await call('alice-key', 'GET', `/v1/contexts/${made.id}`)).json()) as any).tokens;
    const tokens = await held();
    expect(tokens).toBeGreaterThan(made.tokens);
    const theirs = await call('bob-key', 'POST', '/v1/completions', { prompt: 'zzz', max_tokens: 1, temperature: 0, svc_session: made.id });
    expect([theirs.status, ((await theirs.json()) as any).error.message]).toEqual([404, `no such context on this model: ${made.id}`]);
    expect(await held()).toBe(tokens);
  });

  it("never reuses another caller's retained prompt (cached_tokens would tell bob what alice sent)", async () => {
    const prompt = 'Once upon a time, there was a big red ball. Tim and Sue played with it in the park every day.';
    const cached = async (key: string) => {
      const r: any = await (await call(key, 'POST', '/v1/completions', { prompt, max_tokens: 2, temperature: 0 })).json();
      return r.usage.prompt_tokens_details.cached_tokens;
    };
    expect(await cached('alice-key')).toBe(0);
    expect(await cached('bob-key')).toBe(0);
    expect(await cached('alice-key')).toBeGreaterThan(10);
    expect(await cached('bob-key')).toBeGreaterThan(10);
  });
});
