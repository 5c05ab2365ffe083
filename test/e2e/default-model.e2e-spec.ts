/**
 * Which model `model: ""` stands for (spec rule 1) and what /healthz reports: without -m, the model
 * chosen at boot (or the first pulled into a server with none) until it leaves the store; a pull
 * or copy never moves it, and the -embed encoder never is it (spec rule 7: no model, 503).
 */
import { copyFileSync, mkdtempSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { createHash } from 'node:crypto';
import { fixtureModel, STORIES, syntheticModel } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

const NO_MODEL = 'this server has no model. Pull one: POST /api/pull';
const stories = readFileSync(fixtureModel(STORIES));
const qwen = readFileSync(syntheticModel('qwen2.5-tiny'));
const tmp = (p: string) => mkdtempSync(join(tmpdir(), p));

interface Health {
  status: string;
  model: string;
  id: string;
  warning?: string;
}

/** A plain HTTP server handing out GGUF files (/files/<name>.gguf), for a pull by URL. */
async function fileServer(served: Record<string, Buffer>): Promise<{ url: (name: string) => string; close: () => Promise<void> }> {
  const srv: Server = createServer((req, res) => {
    const body = served[/^\/files\/(\w+)\.gguf$/.exec(req.url ?? '')?.[1] ?? ''];
    if (!body) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length }).end(body);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as AddressInfo).port;
  return { url: (name) => `http://127.0.0.1:${port}/files/${name}.gguf`, close: () => new Promise((r) => srv.close(() => r())) };
}

async function health(srv: RunningServer): Promise<Health> {
  return (await (await fetch(`${srv.url}/healthz`)).json()) as Health;
}

/** /healthz once a reload of the default (after a delete or the first pull) settled. */
async function settledHealth(srv: RunningServer, until: (h: Health) => boolean): Promise<Health> {
  let h = await health(srv);
  for (let i = 0; i < 100 && !(h.status === 'ok' && until(h)); i++) {
    await new Promise((r) => setTimeout(r, 100));
    h = await health(srv);
  }
  return h;
}

const generate = (srv: RunningServer, body: object = {}) => postJson(`${srv.url}/api/generate`, { prompt: 'Once', stream: false, options: { num_predict: 1 }, ...body });
const chat = (srv: RunningServer) => postJson(`${srv.url}/v1/chat/completions`, { model: '', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 });
const storeCall = (srv: RunningServer, path: string, method: string, body: object) =>
  fetch(`${srv.url}${path}`, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).then((r) => r.status);
const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

describe('the default model without -m', () => {
  let files: Awaited<ReturnType<typeof fileServer>>;
  let srv: RunningServer;
  let mine: string;

  beforeAll(async () => {
    files = await fileServer({ stories, other: qwen });
    const store = tmp('svc-default-store-');
    copyFileSync(syntheticModel('qwen2.5-tiny'), join(store, 'mine.gguf'));
    srv = await startServer(['-store', store, '-threads', '1', '-concurrency', '2'], { env: { OLLAMA_MODELS: tmp('svc-default-ollama-'), SVC_REGISTRY_SCHEME: 'http' } });
    mine = (await settledHealth(srv, (h) => h.model !== '')).model;
  });
  afterAll(async () => {
    await srv?.stop();
    await files?.close();
  });

  it('stays the model chosen at boot after a pull and a copy, in every dialect and in /healthz', async () => {
    expect(mine).toMatch(/^mine/);
    const pulled = await postJson(`${srv.url}/api/pull`, { model: files.url('stories'), stream: false });
    expect([pulled.status, pulled.json]).toEqual([200, { status: 'success' }]);
    expect(await storeCall(srv, '/api/copy', 'POST', { source: 'stories', destination: 'newer' })).toBe(200);
    const gen = await generate(srv);
    const oa = await chat(srv);
    expect([gen.status, gen.json.model, oa.status, oa.json.model]).toEqual([200, mine, 200, mine]);
    expect(await health(srv)).toMatchObject({ status: 'ok', model: mine });
    // Only the default is loaded: '' loaded no second model.
    const ps = (await (await fetch(`${srv.url}/api/ps`)).json()) as { models: Array<{ name: string }> };
    expect(ps.models.map((m) => m.name)).toEqual([mine]);
  });

  it('moves to the next model once it is deleted, and /healthz follows', async () => {
    expect(await storeCall(srv, '/api/delete', 'DELETE', { model: mine })).toBe(200);
    const h = await settledHealth(srv, (x) => x.model !== '' && x.model !== mine);
    expect(['stories:latest', 'newer:latest']).toContain(h.model);
    expect(h.id).toBe(sha(stories));
    // /v1 requests (a local-runner one would set its keep_alive over the default's stay).
    const oa = await chat(srv);
    expect([oa.status, oa.json.model]).toEqual([200, h.model]);
    // A newer copy does not move the new default either.
    expect(await storeCall(srv, '/api/copy', 'POST', { source: 'stories', destination: 'newest' })).toBe(200);
    expect((await chat(srv)).json.model).toBe(h.model);
    expect((await health(srv)).model).toBe(h.model);
  });

  it('follows its name copied over with other weights; the old ones, still listed, stop staying loaded', async () => {
    const def = (await health(srv)).model;
    const ps = async () => ((await (await fetch(`${srv.url}/api/ps`)).json()) as { models: Array<{ name: string; expires_at: string }> }).models;
    expect((await ps()).find((m) => m.name === def)?.expires_at).toBe('2318-01-01T00:00:00.000Z'); // the default stays
    const pulled = await postJson(`${srv.url}/api/pull`, { model: files.url('other'), stream: false });
    expect(pulled.status).toBe(200);
    expect(await storeCall(srv, '/api/copy', 'POST', { source: 'other', destination: def })).toBe(200);
    const h = await settledHealth(srv, (x) => x.id === sha(qwen));
    expect([h.model, h.id]).toEqual([def, sha(qwen)]);
    expect((await generate(srv)).json.model).toBe(def);
    // The stories weights (newest, newer or stories still name them) now expire as any model a request loaded.
    const old = (await ps()).find((m) => m.name !== def);
    expect(old?.name).toMatch(/^(stories|newer|newest):latest$/);
    expect(new Date(old!.expires_at).getTime()).toBeLessThan(Date.now() + 6 * 60_000);
  });
});

describe('an empty store with -embed', () => {
  let files: Awaited<ReturnType<typeof fileServer>>;
  let srv: RunningServer;
  const bert = syntheticModel('bert-tiny');
  const encoder = basename(bert, '.gguf');

  beforeAll(async () => {
    files = await fileServer({ stories });
    srv = await startServer(['-store', tmp('svc-default-empty-'), '-embed', bert, '-threads', '1', '-concurrency', '2'], {
      env: { OLLAMA_MODELS: tmp('svc-default-ollama-'), SVC_REGISTRY_SCHEME: 'http' },
    });
  });
  afterAll(async () => {
    await srv?.stop();
    await files?.close();
  });

  it('is the no-model state: generation answers 503, /healthz warns, embeddings still find the encoder', async () => {
    const h = await settledHealth(srv, (x) => x.warning !== undefined || x.model !== '');
    expect(h).toMatchObject({ status: 'ok', model: '', id: '', warning: NO_MODEL });
    const apiChat = await postJson(`${srv.url}/api/chat`, { messages: [{ role: 'user', content: 'x' }], stream: false });
    const gen = await generate(srv, { prompt: 'x' });
    const oa = await chat(srv);
    expect([apiChat.status, apiChat.json, gen.status, gen.json]).toEqual([503, { error: NO_MODEL }, 503, { error: NO_MODEL }]);
    expect([oa.status, oa.json]).toEqual([503, { error: { message: NO_MODEL, type: 'Service Unavailable' } }]);
    // Whatever a generation request names (README: the no-model 503); an embedding route's unknown name is its 404.
    const named = await generate(srv, { model: 'foo', prompt: 'x' });
    expect([named.status, named.json]).toEqual([503, { error: NO_MODEL }]);
    const emb = await postJson(`${srv.url}/v1/embeddings`, { model: '', input: 'hello' });
    expect([emb.status, emb.json.model]).toEqual([200, encoder]);
    const unknown = await postJson(`${srv.url}/v1/embeddings`, { model: 'foo', input: 'hello' });
    expect([unknown.status, unknown.json.error.message]).toEqual([404, `no model named foo; available: ${encoder}`]);
  });

  it('serves the first pulled model as the default, and /healthz names it', async () => {
    const pulled = await postJson(`${srv.url}/api/pull`, { model: files.url('stories'), stream: false });
    expect([pulled.status, pulled.json]).toEqual([200, { status: 'success' }]);
    const h = await settledHealth(srv, (x) => x.model !== '' && x.model !== encoder);
    expect([h.model, h.id, h.warning]).toEqual(['stories:latest', sha(stories), undefined]);
    const gen = await generate(srv);
    expect([gen.status, gen.json.model]).toEqual([200, 'stories:latest']);
    const emb = await postJson(`${srv.url}/api/embed`, { input: 'hello' });
    expect([emb.status, emb.json.model]).toEqual([200, encoder]);
  });
});

describe('a default that fails to load', () => {
  let srv: RunningServer;

  beforeAll(async () => {
    const store = tmp('svc-default-broken-');
    copyFileSync(syntheticModel('qwen2.5-tiny'), join(store, 'mine.gguf'));
    utimesSync(join(store, 'mine.gguf'), new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    // Whole metadata (it lists as a model that generates), half its tensor data: the newest, so the boot's choice.
    writeFileSync(join(store, 'broken.gguf'), stories.subarray(0, stories.length >> 1));
    srv = await startServer(['-store', store, '-threads', '1', '-concurrency', '2'], { env: { OLLAMA_MODELS: tmp('svc-default-ollama-') }, waitStatus: [200, 503] });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('is replaced by the next once it is deleted', async () => {
    let h = await health(srv);
    for (let i = 0; i < 100 && h.status === 'loading'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      h = await health(srv);
    }
    expect(h.status).toBe('failed');
    expect(await storeCall(srv, '/api/delete', 'DELETE', { model: 'broken' })).toBe(200);
    h = await settledHealth(srv, (x) => x.model !== '');
    expect([h.status, h.model, h.warning]).toEqual(['ok', expect.stringMatching(/^mine/), undefined]);
    const gen = await generate(srv);
    expect([gen.status, gen.json.model]).toEqual([200, h.model]);
  });
});
