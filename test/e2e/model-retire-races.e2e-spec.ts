/**
 * Store changes that land while a model waits for memory: with a budget no two models fit, a
 * load waits for the busy one to finish. A name deleted or repointed meanwhile answers 404 or
 * the weights it names now (never a vanished blob's 500 or a "shutting down" 503), and the
 * listings answer at once rather than after the waiting load. Also -keep-alive, the default
 * keep_alive of a local-runner request that sends none.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(240_000);

const json = (url: string, method: string, body?: unknown) =>
  fetch(url, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) }).then(async (r) => ({
    status: r.status,
    json: (await r.json().catch(() => undefined)) as any,
  }));

describe('store changes while a load waits for memory', () => {
  let srv: RunningServer;
  const store = mkdtempSync(join(tmpdir(), 'svc-retire-'));
  beforeAll(async () => {
    // Distinct bytes each (trailing padding), so no two share a blob once copied into the store.
    const weights = readFileSync(fixtureModel(STORIES));
    ['busy', 'waits', 'other', 'again'].forEach((n, i) => writeFileSync(join(store, `${n}.gguf`), Buffer.concat([weights, Buffer.alloc(32 * (i + 1))])));
    // One byte: every load must first unload every other model, waiting while one is busy.
    srv = await startServer(['-threads', '2', '-store', store, '-memory-budget', '1', '-keep-alive', '1h'], {
      env: { OLLAMA_MODELS: mkdtempSync(join(tmpdir(), 'ollama-')) },
    });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  /** Keeps `model` generating until its context fills (seconds); resolves when the stream ends. */
  async function keepBusy(model: string): Promise<{ ended: Promise<number> }> {
    const res = await fetch(`${srv.url}/api/generate`, {
      method: 'POST',
      body: JSON.stringify({ model, prompt: 'Once upon a time', options: { num_predict: -1, temperature: 0 } }),
    });
    const reader = res.body!.getReader();
    expect((await reader.read()).done).toBe(false);
    const ended = (async () => {
      while (!(await reader.read()).done);
      return Date.now();
    })();
    return { ended };
  }
  const psNames = async () => ((await json(`${srv.url}/api/ps`, 'GET')).json.models as Array<{ name: string }>).map((m) => m.name);

  it('listings answer while a load waits; a name deleted meanwhile is a 404 naming no file', async () => {
    const busy = await keepBusy('busy');
    const waiting = postJson(`${srv.url}/api/generate`, { model: 'waits', prompt: 'x', stream: false, options: { num_predict: 1 } }).then((r) => ({ ...r, at: Date.now() }));
    await new Promise((r) => setTimeout(r, 300));
    // Before: each waited for the pending load, so for the busy model's whole generation.
    const [ps, tags, stats] = await Promise.all([json(`${srv.url}/api/ps`, 'GET'), json(`${srv.url}/api/tags`, 'GET'), fetch(`${srv.url}/metrics`)]);
    const listedAt = Date.now();
    expect([ps.status, tags.status, stats.status]).toEqual([200, 200, 200]);
    expect(ps.json.models.map((m: { name: string }) => m.name)).toEqual(['busy']);
    expect((await json(`${srv.url}/api/delete`, 'DELETE', { model: 'waits' })).status).toBe(200);
    const res = await waiting;
    // The delete is noticed while waiting, not after the busy model is done.
    expect(res.at).toBeLessThan(await busy.ended);
    expect(listedAt).toBeLessThan(await busy.ended);
    expect(res.status).toBe(404);
    expect(res.json.error).toMatch(/waits/);
    expect(JSON.stringify(res.json)).not.toMatch(/blobs|\.gguf|ENOENT/);
  });

  it('a name repointed while its load waits answers from the weights it names now, in every dialect', async () => {
    for (const route of ['/v1/chat/completions', '/v1/messages', '/api/chat']) {
      const busy = await keepBusy('busy');
      expect((await json(`${srv.url}/api/copy`, 'POST', { source: 'again', destination: 'moving' })).status).toBe(200);
      const messages = [{ role: 'user', content: 'Hi' }];
      const body = route === '/api/chat' ? { model: 'moving', messages, stream: false, options: { num_predict: 2 } } : { model: 'moving', messages, max_tokens: 2 };
      const answer = postJson(`${srv.url}${route}`, body);
      await new Promise((r) => setTimeout(r, 300));
      // The old weights of "moving" are named by nothing after this: they are deleted.
      expect((await json(`${srv.url}/api/copy`, 'POST', { source: 'other', destination: 'moving' })).status).toBe(200);
      const res = await answer;
      expect([route, res.status]).toEqual([route, 200]);
      expect(res.json.model).toBe('moving:latest');
      await busy.ended;
    }
  });

  it('requests racing a name being repointed over and over all answer 200, none "shutting down"', async () => {
    // Each copy retires the weights the name held, sometimes between a request's acquire and its
    // submit: that request was refused as if the server were stopping (78 in 15 s before).
    expect((await json(`${srv.url}/api/copy`, 'POST', { source: 'busy', destination: 'flip' })).status).toBe(200);
    const deadline = Date.now() + 8000;
    const statuses: Record<string, number> = {};
    const flipper = async () => {
      for (let i = 0; Date.now() < deadline; i++) await json(`${srv.url}/api/copy`, 'POST', { source: i % 2 ? 'busy' : 'other', destination: 'flip' });
    };
    const worker = async (route: string) => {
      while (Date.now() < deadline) {
        const r = await postJson(`${srv.url}${route}`, { model: 'flip', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
        const key = r.status === 200 ? '200' : `${r.status} ${JSON.stringify(r.json)}`;
        statuses[key] = (statuses[key] ?? 0) + 1;
      }
    };
    await Promise.all([flipper(), worker('/v1/chat/completions'), worker('/v1/chat/completions'), worker('/v1/messages'), worker('/v1/messages')]);
    expect(Object.keys(statuses)).toEqual(['200']);
    expect(statuses['200']).toBeGreaterThan(100);
    expect((await json(`${srv.url}/api/delete`, 'DELETE', { model: 'flip' })).status).toBe(200);
  });

  it('-keep-alive is the keep_alive of a local-runner request that sends none; other routes renew the last one set', async () => {
    const expires = async (name: string) => {
      const m = ((await json(`${srv.url}/api/ps`, 'GET')).json.models as Array<{ name: string; expires_at: string }>).find((x) => x.name === name);
      return m ? new Date(m.expires_at).getTime() - Date.now() : undefined;
    };
    const gen = (more: object) => postJson(`${srv.url}/api/generate`, { model: 'other', prompt: 'x', stream: false, options: { num_predict: 1 }, ...more });
    expect((await gen({})).status).toBe(200);
    const hour = await expires('other');
    expect(hour).toBeGreaterThan(59 * 60_000);
    expect(hour).toBeLessThanOrEqual(60 * 60_000);
    expect((await gen({ keep_alive: -1 })).status).toBe(200);
    const forever = await expires('other');
    expect(forever).toBeGreaterThan(50 * 365 * 24 * 3600_000);
    // A /v1 request renews what the local runner set...
    expect((await postJson(`${srv.url}/v1/completions`, { model: 'other', prompt: 'x', max_tokens: 1 })).status).toBe(200);
    expect(await expires('other')).toBeGreaterThan(50 * 365 * 24 * 3600_000);
    // ...and a local-runner request without keep_alive sets the default, as the local runner does.
    expect((await gen({})).status).toBe(200);
    expect(await expires('other')).toBeLessThanOrEqual(60 * 60_000);
    expect(await psNames()).toEqual(['other']);
  });
});
