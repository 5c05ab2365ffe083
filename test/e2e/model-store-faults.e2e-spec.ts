/**
 * The model store when the registry, the URL or the request is wrong, and when names share
 * weights: a registry's faults are 502s (never a 500, a loop or a 401 of svc's own), a bad
 * request is a 400, nothing half-pulled is listed or kept, and deleting one name of shared
 * weights leaves the others (and their contexts) alone.
 */
import { mkdtempSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { FakeRegistry, serveFile, sha256 } from './helpers/fake-registry';
import { freePort, postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

const MODEL = 'application/vnd.ollama.image.model';
const weights = readFileSync(fixtureModel(STORIES));
const layer = { mediaType: MODEL, digest: sha256(weights), size: weights.length };
const manifest = (layers: unknown[]) => ({ schemaVersion: 2, mediaType: 'application/vnd.docker.distribution.manifest.v2+json', layers });
const call = (url: string, method: string, body: unknown) =>
  fetch(url, { method, headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) }).then(async (r) => ({
    status: r.status,
    json: (await r.json().catch(() => undefined)) as any,
  }));

describe('model store faults', () => {
  let reg: FakeRegistry;
  let srv: RunningServer;
  const store = mkdtempSync(join(tmpdir(), 'svc-store-faults-'));
  const blobs = () => {
    try {
      return readdirSync(join(store, 'blobs'));
    } catch {
      return [];
    }
  };
  beforeAll(async () => {
    reg = await new FakeRegistry().start();
    reg.add({ name: 'library/tiny:latest', layers: [{ mediaType: MODEL, data: weights }] });
    reg.addRaw('library/strsize:latest', manifest([{ ...layer, size: 'abc' }]));
    reg.addRaw('library/nullayer:latest', manifest([null]));
    reg.addRaw('library/garbage:latest', 'this is not json{');
    // Says the blob is longer than it is: the download meets the end (416) before the size.
    reg.addRaw('library/short:latest', manifest([{ ...layer, size: weights.length + 1000 }]));
    // Says the blob is shorter than what the registry sends: svc stops at the declared size.
    reg.addRaw('library/long:latest', manifest([{ ...layer, size: 1000 }]));
    // A manifest of 5 MiB: it was read whole into memory (one of gigabytes took the server down).
    // Only a template layer: nothing to run, so nothing to list.
    reg.add({ name: 'library/noweights:latest', layers: [{ mediaType: 'application/vnd.ollama.image.template', data: Buffer.from('{{ .Prompt }}') }] });
    reg.addRaw('library/huge:latest', JSON.stringify({ ...manifest([layer]), padding: 'x'.repeat(5 << 20) }));
    // Weights plus a LoRA adapter layer: listed as <base>+<name>.
    reg.add({ name: 'library/adapter:latest', layers: [{ mediaType: MODEL, data: weights }, { mediaType: 'application/vnd.ollama.image.adapter', data: Buffer.concat([weights, Buffer.alloc(32)]) }] });
    reg.add({ name: 'library/swap:latest', layers: [{ mediaType: MODEL, data: Buffer.concat([weights, Buffer.alloc(96)]) }] });
    srv = await startServer(['-threads', '2', '-store', store], { env: { OLLAMA_MODELS: mkdtempSync(join(tmpdir(), 'ollama-')), SVC_REGISTRY_SCHEME: 'http' } });
  });
  afterAll(async () => {
    await srv?.stop();
    await reg?.stop();
  });
  const pull = (model: unknown, more: object = {}) => call(`${srv.url}/api/pull`, 'POST', { model, stream: false, ...more });

  it("a registry's bad manifests and short blobs are 502s, quickly, and leave nothing behind", async () => {
    const cases: Array<[string, RegExp]> = [
      ['strsize', /the registry gives sha256:[0-9a-f]{12} a size of "abc"$/],
      ['nullayer', /the registry sent a layer without a sha256 digest: null$/],
      ['garbage', /sent something that is not JSON$/],
      ['short', /the registry answered 416 Range Not Satisfiable$/],
      ['long', /the registry sent more bytes than the 1000 the manifest declares$/],
      ['huge', /the manifest from 127\.0\.0\.1:\d+ is larger than 4194304 bytes$/],
      ['noweights', /library\/noweights:latest holds no model weights \(no application\/vnd\.ollama\.image\.model layer\)$/],
    ];
    for (const [name, message] of cases) {
      const t0 = Date.now();
      const r = await pull(`${reg.host}/library/${name}`);
      expect([name, r.status]).toEqual([name, 502]);
      expect(r.json.error).toMatch(message);
      expect(Date.now() - t0).toBeLessThan(20_000);
    }
    // Unreachable: a 502 naming why, not a 500 "fetch failed".
    const closed = await freePort();
    const gone = await pull(`127.0.0.1:${closed}/library/x`);
    expect(gone.status).toBe(502);
    expect(gone.json.error).toMatch(new RegExp(`cannot reach 127\\.0\\.0\\.1:${closed}: ECONNREFUSED$`));
    const tags = (await (await fetch(`${srv.url}/api/tags`)).json()) as { models: unknown[] };
    expect(tags.models).toEqual([]);
    expect(blobs()).toEqual([]);
    expect(readdirSync(join(store, 'partial')).filter((f) => f.includes('part'))).toEqual([]);
  });

  it('wrong types and bad URLs are 400s', async () => {
    expect((await pull(123)).json).toEqual({ error: 'cannot parse request: model must be a string' });
    expect((await pull([`${reg.host}/library/tiny`])).json).toEqual({ error: 'cannot parse request: model must be a string' });
    expect((await pull('x', { stream: 'false' })).json).toEqual({ error: 'cannot parse request: stream must be a boolean' });
    expect((await call(`${srv.url}/api/pull`, 'POST', 'null')).json).toEqual({ error: 'cannot parse request: the body must be a JSON object' });
    expect((await call(`${srv.url}/api/delete`, 'DELETE', { model: 123 })).json).toEqual({ error: 'cannot parse request: model must be a string' });
    for (const [path, method, body] of [['/api/copy', 'POST', { source: 'nope', destination: 'x' }], ['/api/delete', 'DELETE', { model: 'nope' }]] as const) {
      const r = await call(`${srv.url}${path}`, method, body);
      expect([r.status, r.json.error]).toEqual([404, expect.stringMatching(/^no model named nope; available: /)]);
    }
    const url = await pull('http://');
    expect(url.status).toBe(400);
    expect(url.json.error).toMatch(/http:\/\/ is not a URL$/);
  });

  it('a URL that serves no GGUF file is refused and not listed', async () => {
    const page = await serveFile('/junk.gguf', Buffer.from('<html>hi</html>'));
    try {
      const r = await pull(page.url);
      expect(r.status).toBe(400);
      expect(r.json.error).toMatch(/is not a GGUF model file$/);
      expect(((await (await fetch(`${srv.url}/api/tags`)).json()) as { models: unknown[] }).models).toEqual([]);
      expect(blobs()).toEqual([]);
    } finally {
      await page.stop();
    }
  });

  it("deleting a copy leaves the original loaded with its contexts; the last name's delete frees the blob", async () => {
    const tiny = `${reg.host}/library/tiny:latest`;
    expect((await pull(tiny)).status).toBe(200);
    expect((await call(`${srv.url}/api/copy`, 'POST', { source: tiny, destination: 'cp1' })).status).toBe(200);
    const ctx = await postJson(`${srv.url}/v1/contexts`, { model: tiny, prompt: 'Once upon a time' });
    expect(ctx.status).toBe(201);
    expect((await call(`${srv.url}/api/delete`, 'DELETE', { model: 'cp1' })).status).toBe(200);
    const list = (await (await fetch(`${srv.url}/v1/contexts?model=${encodeURIComponent(tiny)}`)).json()) as { data: Array<{ id: string }> };
    expect(list.data.map((c) => c.id)).toEqual([ctx.json.id]);
    expect(blobs().length).toBeGreaterThan(0);
    expect((await call(`${srv.url}/api/delete`, 'DELETE', { model: tiny })).status).toBe(200);
    expect(blobs()).toEqual([]);
    // The deleted default is no longer reported as the server's model.
    await new Promise((r) => setTimeout(r, 200));
    const health = (await (await fetch(`${srv.url}/healthz`)).json()) as { model: string; warning?: string };
    expect(health.model).toBe('');
    expect(health.warning).toBe('this server has no model. Pull one: POST /api/pull');
  });

  it('two names of one file share a load, and each request answers to the name it asked for', async () => {
    const tiny = `${reg.host}/library/tiny:latest`;
    expect((await pull(tiny)).status).toBe(200);
    expect((await call(`${srv.url}/api/copy`, 'POST', { source: tiny, destination: 'alias' })).status).toBe(200);
    try {
      const first = await postJson(`${srv.url}/api/generate`, { model: 'alias', prompt: 'x', stream: false, options: { num_predict: 1 } });
      expect([first.status, first.json.model]).toEqual([200, 'alias:latest']);
      const gen = await postJson(`${srv.url}/api/generate`, { model: tiny, prompt: 'x', stream: false, options: { num_predict: 1 } });
      const chat = await postJson(`${srv.url}/v1/chat/completions`, { model: tiny, messages: [{ role: 'user', content: 'x' }], max_tokens: 1 });
      const msg = await postJson(`${srv.url}/v1/messages`, { model: tiny, messages: [{ role: 'user', content: 'x' }], max_tokens: 1 });
      const unload = await postJson(`${srv.url}/api/generate`, { model: tiny, keep_alive: 0, stream: false });
      expect([gen.json.model, chat.json.model, msg.json.model, unload.json.model]).toEqual([tiny, tiny, tiny, tiny]);
    } finally {
      await call(`${srv.url}/api/delete`, 'DELETE', { model: 'alias' });
    }
  });

  it('a load goes by a name that still names its weights once the name it loaded under is deleted', async () => {
    reg.add({ name: 'library/named:latest', layers: [{ mediaType: MODEL, data: Buffer.concat([weights, Buffer.alloc(224)]) }] });
    const named = `${reg.host}/library/named:latest`;
    expect((await pull(named)).status).toBe(200);
    expect((await call(`${srv.url}/api/copy`, 'POST', { source: named, destination: 'firstname' })).status).toBe(200);
    expect((await postJson(`${srv.url}/api/generate`, { model: 'firstname', prompt: 'x', stream: false, options: { num_predict: 1 } })).status).toBe(200);
    const digest = (((await (await fetch(`${srv.url}/api/tags`)).json()) as any).models as Array<{ name: string; digest: string }>).find((m) => m.name === named)?.digest;
    expect(digest).toMatch(/^sha256:/);
    const loadedAs = async () => (((await (await fetch(`${srv.url}/api/ps`)).json()) as any).models as Array<{ name: string; digest: string }>).filter((m) => m.digest === digest).map((m) => m.name);
    expect(await loadedAs()).toEqual(['firstname:latest']);
    expect((await call(`${srv.url}/api/delete`, 'DELETE', { model: 'firstname' })).status).toBe(200);
    // Still loaded (the other name holds the weights), listed under that name, not the deleted one.
    expect(await loadedAs()).toEqual([named]);
    expect((await call(`${srv.url}/api/delete`, 'DELETE', { model: named })).status).toBe(200);
  });

  it('a copy over an existing name frees the blobs only the old manifest held', async () => {
    const tiny = `${reg.host}/library/tiny:latest`;
    const page = await serveFile('/other.gguf', Buffer.concat([weights, Buffer.alloc(64)]));
    try {
      expect((await pull(page.url)).status).toBe(200);
      expect((await pull(tiny)).status).toBe(200);
      const before = blobs().length;
      // Loaded under the name the copy replaces: those weights are then named by nothing and go.
      expect((await postJson(`${srv.url}/api/generate`, { model: 'other', prompt: 'x', stream: false, options: { num_predict: 1 } })).status).toBe(200);
      const ps = async () => ((await (await fetch(`${srv.url}/api/ps`)).json()) as any).models as Array<{ name: string; digest: string }>;
      const loaded = async () => (await ps()).map((m) => m.digest);
      const replaced = (await ps()).find((m) => m.name === 'other:latest')?.digest;
      expect(replaced).toBeDefined();
      expect((await call(`${srv.url}/api/copy`, 'POST', { source: tiny, destination: 'other' })).status).toBe(200);
      expect(blobs().length).toBe(before - 1);
      expect(await loaded()).not.toContain(replaced);
    } finally {
      await page.stop();
    }
  });

  it('an adapter entry copies as an adapter and deletes with its manifest; concurrent copies of a file all land', async () => {
    const tiny = `${reg.host}/library/tiny:latest`;
    const adapter = `${reg.host}/library/adapter:latest`;
    expect((await pull(tiny)).status).toBe(200);
    expect((await pull(adapter)).status).toBe(200);
    const tags = async () => ((await (await fetch(`${srv.url}/api/tags`)).json()) as any).models.map((m: any) => m.name as string);
    const entry = (await tags()).find((n: string) => n.endsWith(`+${adapter}`));
    expect(entry).toBeDefined();
    expect((await call(`${srv.url}/api/copy`, 'POST', { source: entry, destination: 'ad2' })).status).toBe(200);
    expect(await tags()).toContain(`${entry!.split('+')[0]}+ad2:latest`);
    expect((await call(`${srv.url}/api/delete`, 'DELETE', { model: entry })).status).toBe(200);
    expect((await call(`${srv.url}/api/delete`, 'DELETE', { model: `${entry!.split('+')[0]}+ad2:latest` })).status).toBe(200);
    // No manifest is left pointing at a deleted blob, and the base's weights stay.
    const manifests = readdirSync(join(store, 'manifests'), { recursive: true }).map(String);
    expect(manifests.filter((f) => /adapter|ad2/.test(f))).toEqual([]);
    expect(blobs()).toContain(sha256(weights).replace(':', '-'));
    expect((await call(`${srv.url}/api/show`, 'POST', { model: tiny })).status).toBe(200);
    // Eight copies of one file at once: one temporary file each, so none fails on another's rename.
    writeFileSync(join(store, 'flat.gguf'), weights);
    const copies = await Promise.all([...Array(8).keys()].map((i) => call(`${srv.url}/api/copy`, 'POST', { source: 'flat', destination: `flat${i}` })));
    expect(copies.map((c) => c.status)).toEqual(Array(8).fill(200));
    for (let i = 0; i < 8; i++) expect((await call(`${srv.url}/api/delete`, 'DELETE', { model: `flat${i}` })).status).toBe(200);
    unlinkSync(join(store, 'flat.gguf'));
    expect(readdirSync(join(store, 'partial'))).toEqual([]);
  });

  it('a pull that moves a tag to new weights frees the old ones', async () => {
    const swap = `${reg.host}/library/swap:latest`;
    expect((await pull(swap)).status).toBe(200);
    expect((await postJson(`${srv.url}/api/generate`, { model: swap, prompt: 'x', stream: false, keep_alive: -1, options: { num_predict: 1 } })).status).toBe(200);
    const digests = async () => ((await (await fetch(`${srv.url}/api/ps`)).json()) as any).models.filter((m: any) => m.name === swap).map((m: any) => m.digest);
    const [old] = await digests();
    expect(old).toBeDefined();
    reg.add({ name: 'library/swap:latest', layers: [{ mediaType: MODEL, data: Buffer.concat([weights, Buffer.alloc(128)]) }] });
    expect((await pull(swap)).status).toBe(200);
    for (let i = 0; i < 50 && (await digests()).includes(old); i++) await new Promise((r) => setTimeout(r, 100));
    expect(await digests()).not.toContain(old);
    expect((await postJson(`${srv.url}/api/generate`, { model: swap, prompt: 'x', stream: false, options: { num_predict: 1 } })).status).toBe(200);
    const now = await digests();
    expect(now).toHaveLength(1);
    expect(now[0]).not.toBe(old);
    expect((await call(`${srv.url}/api/delete`, 'DELETE', { model: swap })).status).toBe(200);
  });

  it('a delete answers at once while the model generates: the stream ends cleanly, then the weights go', async () => {
    const name = `${reg.host}/library/busy:latest`;
    reg.add({ name: 'library/busy:latest', layers: [{ mediaType: MODEL, data: Buffer.concat([weights, Buffer.alloc(160)]) }] });
    expect((await pull(name)).status).toBe(200);
    // Until the context fills (about 2000 tokens): seconds of generation on any machine.
    const res = await fetch(`${srv.url}/api/generate`, { method: 'POST', body: JSON.stringify({ model: name, prompt: 'Once upon a time', options: { num_predict: -1, temperature: 0 } }) });
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    const del = await call(`${srv.url}/api/delete`, 'DELETE', { model: name });
    const deletedAt = Date.now();
    expect(del.status).toBe(200);
    const ps = (await (await fetch(`${srv.url}/api/ps`)).json()) as { models: Array<{ name: string }> };
    expect(ps.models.map((m) => m.name)).not.toContain(name);
    let text = new TextDecoder().decode(first.value);
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
    const endedAt = Date.now();
    // It waited for the generation before (the whole stream, seconds).
    expect(endedAt - deletedAt).toBeGreaterThan(300);
    const lines = text.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.at(-1)).toMatchObject({ done: true, done_reason: 'length' });
    expect(lines.at(-1).eval_count).toBeGreaterThan(1000);
    expect((await postJson(`${srv.url}/api/generate`, { model: name, prompt: 'x', stream: false })).status).toBe(404);
  });

  it('a keep_alive past any date is forever; keep_alive 0 with no prompt answers unload', async () => {
    const tiny = `${reg.host}/library/tiny:latest`;
    const g = await postJson(`${srv.url}/api/generate`, { model: tiny, prompt: 'x', stream: false, keep_alive: 9e15, options: { num_predict: 1 } });
    expect(g.status).toBe(200);
    const ps = await fetch(`${srv.url}/api/ps`);
    expect(ps.status).toBe(200);
    const unload = await postJson(`${srv.url}/api/generate`, { model: tiny, keep_alive: 0, stream: false });
    expect(unload.json.done_reason).toBe('unload');
    const names = async () => ((await (await fetch(`${srv.url}/api/ps`)).json()) as any).models.map((m: any) => m.name);
    for (let i = 0; i < 100 && (await names()).includes(g.json.model); i++) await new Promise((r) => setTimeout(r, 100));
    expect(await names()).not.toContain(g.json.model);
    // Unloading a model that is not loaded leaves it so: it was loaded only to be freed again.
    const again = await postJson(`${srv.url}/api/generate`, { model: tiny, keep_alive: 0, stream: false });
    expect([again.status, again.json.done_reason, again.json.model, again.json.load_duration]).toEqual([200, 'unload', g.json.model, 0]);
    expect(await names()).not.toContain(g.json.model);
    expect((await postJson(`${srv.url}/api/generate`, { model: 'no-such-model', keep_alive: 0, stream: false })).status).toBe(404);
  });
});
