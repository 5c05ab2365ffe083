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
});
