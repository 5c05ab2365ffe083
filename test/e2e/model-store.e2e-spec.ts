import { Ollama } from 'ollama';
import { existsSync, mkdtempSync, readdirSync, readFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { fixtureModel, STORIES, syntheticModel } from './helpers/fixtures';
import { FakeRegistry, serveChangingFile, sha256 } from './helpers/fake-registry';
import { hashTree, writeOllamaModel } from './helpers/ollama-store';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

const MODEL = 'application/vnd.ollama.image.model';
const weights = readFileSync(fixtureModel(STORIES));
const tmp = (p: string) => mkdtempSync(join(tmpdir(), p));
const send = (url: string, method: string, body?: unknown) =>
  fetch(url, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined }).then(async (r) => ({ status: r.status, text: await r.text() }));
const complete = (srv: RunningServer, model: string) => postJson(`${srv.url}/v1/completions`, { model, prompt: 'Once upon a time', max_tokens: 4, temperature: 0 });

describe('pull into an empty server', () => {
  let reg: FakeRegistry;
  let srv: RunningServer;
  const ollamaDir = tmp('ollama-empty-');
  beforeAll(async () => {
    reg = await new FakeRegistry({ token: 't0k', cdn: true, dropOnce: new Set([sha256(weights)]) }).start();
    reg.add({ name: 'library/tiny:latest', layers: [{ mediaType: MODEL, data: weights }] });
    srv = await startServer(['-threads', '2'], { env: { OLLAMA_MODELS: ollamaDir, SVC_REGISTRY_SCHEME: 'http' } });
  });
  afterAll(async () => {
    await srv?.stop();
    await reg?.stop();
  });

  it('answers 503 before, serves the pulled model after, without a restart', async () => {
    expect((await complete(srv, '')).status).toBe(503);
    const client = new Ollama({ host: srv.url });
    const progress: Array<{ status: string; completed?: number; total?: number }> = [];
    for await (const p of await client.pull({ model: `${reg.host}/library/tiny:latest`, stream: true })) progress.push(p);
    expect(progress[0].status).toBe('pulling manifest');
    expect(progress.some((p) => p.status === `pulling ${sha256(weights).slice(7, 19)}` && p.completed === weights.length)).toBe(true);
    expect(progress[progress.length - 1].status).toBe('success');
    const cdn = reg.requests.filter((r) => r.server === 'cdn' && r.path.includes(sha256(weights).slice(7)));
    expect(cdn[1]?.range).toMatch(/^bytes=\d+-$/); // resumed after the drop
    const r = await complete(srv, '');
    expect(r.status).toBe(200);
    const list = await client.list();
    expect(list.models.map((m) => m.name)).toContain(`${reg.host}/library/tiny:latest`);
    const health: any = await (await fetch(`${srv.url}/healthz`)).json();
    expect(health.model).toBe(`${reg.host}/library/tiny:latest`);
  });

  it('stream:false answers one success object; a missing model is an error', async () => {
    const ok = await postJson(`${srv.url}/api/pull`, { model: `${reg.host}/library/tiny`, stream: false });
    expect(ok.json).toEqual({ status: 'success' });
    const missing = await postJson(`${srv.url}/api/pull`, { model: `${reg.host}/library/nope`, stream: false });
    expect(missing.status).toBe(404);
    expect(missing.json.error).toMatch(/file does not exist/);
    const streamed = await postJson(`${srv.url}/api/pull`, { model: `${reg.host}/library/nope` });
    expect(streamed.text.trim().split('\n').pop()).toMatch(/"error":".*file does not exist/);
  });

  it('refuses hostile names before touching files', async () => {
    for (const model of ['../../etc/passwd', '/abs', 'a//b', 'x'.repeat(200), 'ns/.hidden:1', 'a b']) {
      const r = await postJson(`${srv.url}/api/pull`, { model });
      expect(r.status).toBe(400);
      expect(typeof r.json.error).toBe('string');
    }
    expect((await postJson(`${srv.url}/api/copy`, { source: `${reg.host}/library/tiny`, destination: '../x' })).status).toBe(400);
  });

  it('copy and delete with the official client; push, create and blobs answer 501', async () => {
    const client = new Ollama({ host: srv.url });
    await client.copy({ source: `${reg.host}/library/tiny:latest`, destination: 'tiny-copy' });
    expect((await client.list()).models.map((m) => m.name)).toContain('tiny-copy:latest');
    expect((await complete(srv, 'tiny-copy')).status).toBe(200);
    await client.delete({ model: 'tiny-copy' });
    expect((await client.list()).models.map((m) => m.name)).not.toContain('tiny-copy:latest');
    expect((await complete(srv, '')).status).toBe(200); // shared blob kept
    for (const [m, p] of [['POST', '/api/push'], ['POST', '/api/create'], ['POST', `/api/blobs/${sha256(weights)}`], ['HEAD', `/api/blobs/${sha256(weights)}`]]) {
      expect((await send(srv.url + p, m, m === 'POST' ? { model: 'x' } : undefined)).status).toBe(501);
    }
  });

  it('show and ps through the official client', async () => {
    const client = new Ollama({ host: srv.url });
    const show = await client.show({ model: `${reg.host}/library/tiny` });
    expect(show).toMatchObject({ capabilities: ['completion'], template: '', details: expect.objectContaining({ format: 'gguf', family: 'llama' }) });
    const ps = await client.ps();
    expect(ps.models.map((m) => m.name)).toContain(`${reg.host}/library/tiny:latest`);
  });
});

describe('-pull=false', () => {
  let srv: RunningServer;
  beforeAll(async () => (srv = await startServer(['-pull=false', '-m', fixtureModel(STORIES)], { env: { OLLAMA_MODELS: tmp('o-') } })));
  afterAll(() => srv?.stop());
  it('answers 501 on pull, copy and delete', async () => {
    expect((await send(`${srv.url}/api/pull`, 'POST', { model: 'x' })).status).toBe(501);
    expect((await send(`${srv.url}/api/copy`, 'POST', { source: 'a', destination: 'b' })).status).toBe(501);
    expect((await send(`${srv.url}/api/delete`, 'DELETE', { model: 'a' })).status).toBe(501);
  });
});

describe('kill -9 mid-pull', () => {
  it('leaves the store consistent and the next pull completes with a ranged request', async () => {
    const reg = await new FakeRegistry({ throttle: 64 * 1024 }).start();
    reg.add({ name: 'library/slow:latest', layers: [{ mediaType: MODEL, data: weights }] });
    const store = tmp('svc-store-kill-');
    const env = { OLLAMA_MODELS: tmp('o-'), SVC_REGISTRY_SCHEME: 'http' };
    try {
      let srv = await startServer(['-store', store], { env });
      const res = await fetch(`${srv.url}/api/pull`, { method: 'POST', body: JSON.stringify({ model: `${reg.host}/library/slow` }), headers: { 'content-type': 'application/json' } });
      const reader = res.body!.getReader();
      let text = '';
      while (!/"completed":[1-9]\d{5,}/.test(text)) text += new TextDecoder().decode((await reader.read()).value);
      await srv.stop('SIGKILL');
      expect(existsSync(join(store, 'manifests'))).toBe(false);
      expect(existsSync(join(store, 'blobs', sha256(weights).replace(':', '-')))).toBe(false);
      expect(readdirSync(join(store, 'partial')).length).toBeGreaterThan(0);
      srv = await startServer(['-store', store], { env });
      try {
        expect(((await (await fetch(`${srv.url}/v1/models`)).json()) as any).data).toEqual([]);
        const r = await postJson(`${srv.url}/api/pull`, { model: `${reg.host}/library/slow`, stream: false });
        expect(r.json).toEqual({ status: 'success' });
        const gets = reg.requests.filter((q) => q.path.includes(`blobs/${sha256(weights)}`));
        expect(gets[gets.length - 1].range).toMatch(/^bytes=[1-9]\d*-$/);
        expect((await complete(srv, '')).status).toBe(200);
      } finally {
        await srv.stop();
      }
    } finally {
      await reg.stop();
    }
  });
});

describe('a URL pull interrupted, then resumed after the file was replaced', () => {
  it('by a server that ignores If-Range: the new file is stored whole, never spliced onto the old part', async () => {
    const replacement = readFileSync(syntheticModel('llama-tiny'));
    const file = await serveChangingFile('/files/swap.gguf', weights);
    const store = tmp('svc-store-swap-');
    const srv = await startServer(['-store', store, '-threads', '1', '-concurrency', '2'], { env: { OLLAMA_MODELS: tmp('o-') } });
    try {
      file.holdAfter(500_000);
      const ac = new AbortController();
      await fetch(`${srv.url}/api/pull`, { method: 'POST', body: JSON.stringify({ model: file.url }), headers: { 'content-type': 'application/json' }, signal: ac.signal });
      const partial = join(store, 'partial');
      const part = () => (existsSync(partial) ? readdirSync(partial).find((f) => f.endsWith('.part0')) : undefined);
      const partSize = () => (part() ? readFileSync(join(partial, part()!)).length : 0);
      for (const t0 = Date.now(); partSize() < 500_000; ) {
        if (Date.now() - t0 > 30_000) throw new Error(`the first pull brought ${partSize()} bytes`);
        await new Promise((r) => setTimeout(r, 50));
      }
      ac.abort(); // as curl -m: the pull stops, its part stays to resume
      expect(readFileSync(join(partial, `${part()}.validator`), 'utf8')).toMatch(/^"[0-9a-f]{32}"/);
      file.set(replacement);
      const r = await postJson(`${srv.url}/api/pull`, { model: file.url, stream: false });
      expect(r.json).toEqual({ status: 'success' });
      const manifest = JSON.parse(readFileSync(join(store, 'manifests', 'registry.ollama.ai', 'library', 'swap', 'latest'), 'utf8'));
      expect(manifest.layers.map((l: { digest: string }) => l.digest)).toEqual([sha256(replacement)]);
      expect(readdirSync(join(store, 'blobs'))).toEqual([sha256(replacement).replace(':', '-')]);
      expect(readdirSync(partial)).toEqual([]);
    } finally {
      await srv.stop();
      await file.stop();
    }
  });
});

describe('the local-runner store, read-only', () => {
  let srv: RunningServer;
  const ollama = tmp('ollama-');
  let before = '';
  beforeAll(async () => {
    writeOllamaModel(ollama, 'llama3:latest', [{ mediaType: MODEL, data: weights }]);
    writeOllamaModel(ollama, 'example.com/ns/vision:1', [{ mediaType: 'application/vnd.ollama.image.projector', data: readFileSync(fixtureModel('mmproj-tinygemma3.gguf')) }]);
    before = hashTree(ollama);
    srv = await startServer([], { env: { OLLAMA_MODELS: ollama } });
  });
  afterAll(() => srv?.stop());

  it('lists, serves, refuses deletes and never writes there', async () => {
    const models = ((await (await fetch(`${srv.url}/v1/models`)).json()) as any).data;
    expect(models).toEqual(expect.arrayContaining([expect.objectContaining({ id: 'llama3:latest', capabilities: ['completion'] }), expect.objectContaining({ id: 'example.com/ns/vision:1', capabilities: [] })]));
    expect((await complete(srv, 'llama3')).status).toBe(200);
    const del = await send(`${srv.url}/api/delete`, 'DELETE', { model: 'llama3' });
    expect(del.status).toBe(403);
    expect(JSON.parse(del.text).error).toBe("llama3:latest belongs to the local-runner's store, which svc only reads");
    const nf = await complete(srv, 'nope');
    expect(nf.json.error.message).toMatch(/llama3:latest \(ollama\)/);
    expect(hashTree(ollama)).toBe(before);
  });
});

describe('two models under a memory budget that fits one', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    const store = tmp('svc-store-two-');
    copyFileSync(fixtureModel(STORIES), join(store, 'a.gguf'));
    copyFileSync(fixtureModel(STORIES), join(store, 'b.gguf'));
    // stories260K: 1.19 MB file + 5 layers * 8192 positions * 32 * 4 bytes ≈ 6.4 MB; 1.5x of that fits one.
    srv = await startServer(['-store', store, '-memory-budget', '9600000', '-threads', '2'], { env: { OLLAMA_MODELS: tmp('o-') } });
  });
  afterAll(() => srv?.stop());

  it('alternates, unloading the idle one, and both keep answering', async () => {
    for (const m of ['a', 'b', 'a', 'b']) expect((await complete(srv, m)).status).toBe(200);
    expect(srv.logs()).toMatch(/unloading a to make room for b/);
  });

  it('keep_alive 0 unloads after the request', async () => {
    // The test above unloaded a already: count this request's own unload, not that one.
    const unloads = () => (srv.logs().match(/unloaded a\b/g) ?? []).length;
    const before = unloads();
    const r = await postJson(`${srv.url}/api/generate`, { model: 'a', prompt: 'Once', stream: false, keep_alive: 0, options: { num_predict: 2 } });
    expect(r.status).toBe(200);
    for (let i = 0; i < 100 && unloads() === before; i++) await new Promise((res) => setTimeout(res, 50));
    expect(unloads()).toBe(before + 1);
    const ps = (await (await fetch(`${srv.url}/api/ps`)).json()) as { models: { name: string }[] };
    expect(ps.models.map((m) => m.name)).not.toContain('a:latest');
    // A listed model not loaded now has no numbers yet, and is no 404 (a poller read it as gone).
    const stats = await fetch(`${srv.url}/v1/stats?model=a`);
    expect([stats.status, await stats.json()]).toEqual([200, { model: 'a', loaded: false }]);
  });
});

describe('a shutdown during a pull', () => {
  it('ends the pull with a message to resume it and exits 0, not after the 60 s limit', async () => {
    // An origin that sends the first bytes of a large file, then stalls.
    const origin = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(64 << 20), etag: '"stall"' });
      if (req.method === 'HEAD') res.end();
      else res.write(weights.subarray(0, 1 << 16));
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(origin.address() as AddressInfo).port}/big.gguf`;
    const srv = await startServer(['-threads', '1'], { env: { OLLAMA_MODELS: tmp('o-') } });
    try {
      const res = await fetch(`${srv.url}/api/pull`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: url }) });
      const reader = res.body!.getReader();
      await reader.read();
      const started = Date.now();
      const exit = srv.stop('SIGTERM');
      let text = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += Buffer.from(value).toString();
      }
      expect([await exit, Date.now() - started < 15_000]).toEqual([0, true]);
      expect(JSON.parse(text.trim().split('\n').pop()!)).toEqual({ error: 'the server is shutting down: the pull stopped (pull again to resume it)' });
    } finally {
      origin.closeAllConnections();
      origin.close();
    }
  });
});

