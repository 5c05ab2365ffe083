/**
 * Store changes that land while a model waits for memory: with a budget no two models fit, a
 * load waits for the busy one to finish. A name deleted or repointed meanwhile answers 404 or
 * the weights it names now (never a vanished blob's 500 or a "shutting down" 503), and the
 * listings answer at once rather than after the waiting load. Also -keep-alive, the default
 * keep_alive of a local-runner request that sends none.
 */
import { mkdtempSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
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
    ['busy', 'waits', 'other', 'again', 'fresh'].forEach((n, i) => writeFileSync(join(store, `${n}.gguf`), Buffer.concat([weights, Buffer.alloc(32 * (i + 1))])));
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

  const waitUnloaded = async (name: string) => {
    for (let i = 0; i < 100 && (await psNames()).includes(name); i++) await new Promise((r) => setTimeout(r, 100));
    expect(await psNames()).not.toContain(name);
  };

  it('contexts of weights a copy took away do not come back when the same weights return', async () => {
    expect((await json(`${srv.url}/api/copy`, 'POST', { source: 'again', destination: 'ctxname' })).status).toBe(200);
    const ctx = await postJson(`${srv.url}/v1/contexts`, { model: 'ctxname', prompt: 'Once upon a time' });
    expect(ctx.status).toBe(201);
    // Unloaded: its contexts wait on disk for the next load of these weights.
    expect((await postJson(`${srv.url}/api/generate`, { model: 'ctxname', keep_alive: 0, stream: false })).status).toBe(200);
    await waitUnloaded('ctxname:latest');
    expect((await json(`${srv.url}/api/copy`, 'POST', { source: 'busy', destination: 'ctxname' })).status).toBe(200);
    expect((await json(`${srv.url}/api/copy`, 'POST', { source: 'again', destination: 'ctxname' })).status).toBe(200);
    const listed = await json(`${srv.url}/v1/contexts?model=ctxname`, 'GET');
    expect([listed.status, listed.json.data]).toEqual([200, []]);
    expect((await json(`${srv.url}/api/delete`, 'DELETE', { model: 'ctxname' })).status).toBe(200);
  });

  it("a stored response keeps its context when its weights come back under another of their names", async () => {
    expect((await json(`${srv.url}/api/copy`, 'POST', { source: 'other', destination: 'nx' })).status).toBe(200);
    expect((await json(`${srv.url}/api/copy`, 'POST', { source: 'nx', destination: 'ny' })).status).toBe(200);
    const first = await postJson(`${srv.url}/v1/responses`, { model: 'nx', input: 'Tell me a story about a cat.', max_output_tokens: 16, temperature: 0 });
    expect(first.status).toBe(200);
    expect((await postJson(`${srv.url}/api/generate`, { model: 'nx', keep_alive: 0, stream: false })).status).toBe(200);
    await waitUnloaded('nx:latest');
    // Loaded again as ny: the same file, so the same contexts.
    expect((await postJson(`${srv.url}/api/generate`, { model: 'ny', prompt: 'x', stream: false, options: { num_predict: 1 } })).status).toBe(200);
    const next = await postJson(`${srv.url}/v1/responses`, { model: 'nx', input: 'And then?', previous_response_id: first.json.id, max_output_tokens: 2, temperature: 0 });
    expect(next.status).toBe(200);
    expect(next.json.usage.input_tokens_details.cached_tokens).toBeGreaterThan(10);
    for (const n of ['nx', 'ny']) expect((await json(`${srv.url}/api/delete`, 'DELETE', { model: n })).status).toBe(200);
  });

  it("dropping a stored response does not wait for another model's load", async () => {
    const busy = await keepBusy('busy');
    const kept = await postJson(`${srv.url}/v1/responses`, { model: 'busy', input: 'Hi', max_output_tokens: 2 });
    expect(kept.status).toBe(200);
    // Waits for memory until the busy model's generation ends (seconds).
    const waiting = postJson(`${srv.url}/api/generate`, { model: 'again', prompt: 'x', stream: false, options: { num_predict: 1 } });
    await new Promise((r) => setTimeout(r, 300));
    const t0 = Date.now();
    expect((await json(`${srv.url}/v1/responses/${kept.json.id}`, 'DELETE')).status).toBe(200);
    const unstored = await postJson(`${srv.url}/v1/responses`, { model: 'busy', input: 'Hi', max_output_tokens: 2, store: false });
    expect(unstored.status).toBe(200);
    const answeredAt = Date.now();
    expect(answeredAt - t0).toBeLessThan(2000);
    expect(answeredAt).toBeLessThan(await busy.ended);
    expect((await waiting).status).toBe(200);
  });

  it('a model deleted while it generates still counts against the budget until it is freed', async () => {
    expect((await json(`${srv.url}/api/copy`, 'POST', { source: 'fresh', destination: 'doomed' })).status).toBe(200);
    const busy = await keepBusy('doomed');
    expect((await json(`${srv.url}/api/delete`, 'DELETE', { model: 'doomed' })).status).toBe(200);
    // Out of service at once, but in memory until its stream ends: the next load waits for that.
    const next = await postJson(`${srv.url}/api/generate`, { model: 'again', prompt: 'x', stream: false, options: { num_predict: 1 } }).then((r) => ({ ...r, at: Date.now() }));
    expect(next.status).toBe(200);
    expect(next.at).toBeGreaterThanOrEqual(await busy.ended);
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
    // A model a /v1 request loads gets -keep-alive too (it stayed forever).
    expect((await postJson(`${srv.url}/v1/completions`, { model: 'fresh', prompt: 'x', max_tokens: 1 })).status).toBe(200);
    const fresh = await expires('fresh');
    expect(fresh).toBeGreaterThan(59 * 60_000);
    expect(fresh).toBeLessThanOrEqual(60 * 60_000);
  });
});

describe('requests on a name repointed over and over (no memory budget)', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    const store = mkdtempSync(join(tmpdir(), 'svc-flip-'));
    const weights = readFileSync(fixtureModel(STORIES));
    ['a', 'b'].forEach((n, i) => writeFileSync(join(store, `${n}.gguf`), Buffer.concat([weights, Buffer.alloc(32 * (i + 1))])));
    srv = await startServer(['-threads', '2', '-store', store], { env: { OLLAMA_MODELS: mkdtempSync(join(tmpdir(), 'ollama-')) } });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('every route answers 200 (201 for contexts), none "shutting down", "disposed" or "in use"', async () => {
    // Each copy retires the weights the name held, sometimes between a request's acquire and its
    // submit: that request was refused as if the server were stopping (78 in 15 s before).
    expect((await json(`${srv.url}/api/copy`, 'POST', { source: 'a', destination: 'flip' })).status).toBe(200);
    const deadline = Date.now() + 10_000;
    const statuses: Record<string, number> = {};
    const flipper = async () => {
      for (let i = 0; Date.now() < deadline; i++) {
        await json(`${srv.url}/api/copy`, 'POST', { source: i % 2 ? 'a' : 'b', destination: 'flip' });
        await new Promise((r) => setTimeout(r, 60));
      }
    };
    const worker = async (route: string) => {
      while (Date.now() < deadline) {
        const r = await postJson(`${srv.url}${route}`, { model: 'flip', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
        const key = r.status === 200 ? '200' : `${r.status} ${JSON.stringify(r.json)}`;
        statuses[key] = (statuses[key] ?? 0) + 1;
      }
    };
    // Routes that make or bind a context between acquire and submit (stored responses, svc_session, contexts).
    const other = async (route: string, body: () => object, ok: number) => {
      while (Date.now() < deadline) {
        const r = await postJson(`${srv.url}${route}`, body());
        const key = r.status === ok ? '200' : `${route} ${r.status} ${JSON.stringify(r.json)}`;
        statuses[key] = (statuses[key] ?? 0) + 1;
      }
    };
    await Promise.all([
      flipper(),
      worker('/v1/chat/completions'),
      worker('/v1/messages'),
      other('/v1/responses', () => ({ model: 'flip', input: 'Hi', max_output_tokens: 2 }), 200),
      other('/v1/responses', () => ({ model: 'flip', input: 'Hi', max_output_tokens: 2, store: false }), 200),
      other('/v1/completions', () => ({ model: 'flip', prompt: 'Once', max_tokens: 2, svc_session: `s${Math.random()}` }), 200),
      other('/v1/contexts', () => ({ model: 'flip', prompt: 'Once upon a time' }), 201),
    ]);
    expect(Object.keys(statuses)).toEqual(['200']);
    expect(statuses['200']).toBeGreaterThan(100);
    expect((await json(`${srv.url}/api/delete`, 'DELETE', { model: 'flip' })).status).toBe(200);
  });
});

describe('the -m file removed behind the server', () => {
  let srv: RunningServer;
  const dir = mkdtempSync(join(tmpdir(), 'svc-gone-m-'));
  const file = join(dir, 'vanishing.gguf');
  beforeAll(async () => {
    writeFileSync(file, readFileSync(fixtureModel(STORIES)));
    srv = await startServer(['-threads', '2', '-m', file, '-store', join(dir, 'store')], { env: { OLLAMA_MODELS: mkdtempSync(join(tmpdir(), 'ollama-')) } });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('listings still answer (the vanished file is just not listed), and the loaded copy still serves', async () => {
    unlinkSync(file);
    const [tags, ps, health] = await Promise.all([json(`${srv.url}/api/tags`, 'GET'), json(`${srv.url}/api/ps`, 'GET'), json(`${srv.url}/healthz`, 'GET')]);
    // Each was a 500 (ENOENT from the listing's stat of the -m file).
    expect([tags.status, ps.status, health.status]).toEqual([200, 200, 200]);
    expect(tags.json.models).toEqual([]);
    expect(ps.json.models.map((m: { name: string }) => m.name)).toEqual(['vanishing']);
  });
});
