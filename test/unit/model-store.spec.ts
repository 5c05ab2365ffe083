import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, copyFileSync, utimesSync } from 'node:fs';
import { ManifestStore, STALE_COPY_MS, STALE_PART_MS } from '../../libs/store/src/manifest-store';
import { STALE_LOCK_MS, withDownloadLock } from '../../libs/store/src/pull/download-lock';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CatalogEntry, DEFAULT_FILE_RECHECK_MS, ModelCatalog } from '../../libs/store/src/catalog';
import { displayName, parseModelRef } from '../../libs/store/src/model-ref';
import { PullProgress, PullService } from '../../libs/store/src/pull/pull-service';
import { parseChallenge } from '../../libs/store/src/pull/registry-client';
import { StoreAdmin } from '../../libs/store/src/store-admin';
import { estimateBytes, parseBytes, parseKeepAlive } from '../../libs/engine/src/models/residency';
import { fixtureModel, STORIES } from '../e2e/helpers/fixtures';
import { FakeRegistry, serveFile, sha256 } from '../e2e/helpers/fake-registry';
import { hashTree, writeOllamaModel } from '../e2e/helpers/ollama-store';

const MODEL = 'application/vnd.ollama.image.model';
const tmp = (p: string) => mkdtempSync(join(tmpdir(), p));

describe('model names', () => {
  it.each([
    ['llama3', 'llama3:latest'],
    ['llama3:8b', 'llama3:8b'],
    ['registry.ollama.ai/library/llama3:latest', 'llama3:latest'],
    ['me/tiny:q8', 'me/tiny:q8'],
    ['127.0.0.1:5999/library/tiny:latest', '127.0.0.1:5999/library/tiny:latest'],
    ['hf.co/user/Repo-GGUF:Q4_K_M', 'hf.co/user/Repo-GGUF:Q4_K_M'],
  ])('%s is listed as %s', (raw, shown) => expect(displayName(parseModelRef(raw))).toBe(shown));

  it.each(['../etc/passwd', '/abs/path', 'a/../b', 'x/y/z/w', 'a//b', ':tag', 'model:', 'mo del', 'ns/.hidden', `${'a'.repeat(129)}`, 'a\\b', 'a;rm', ''])(
    'refuses %j',
    (raw) => expect(() => parseModelRef(raw)).toThrow(/invalid model name|required/),
  );
});

describe('keep_alive, sizes and challenges', () => {
  it('reads durations like Ollama; past any date is forever', () => {
    expect(parseKeepAlive(9e15)).toBe(Infinity);
    expect(parseKeepAlive('99999999999h')).toBe(Infinity);
    expect(parseKeepAlive(undefined)).toBe(300_000);
    expect(parseKeepAlive('5m')).toBe(300_000);
    expect(parseKeepAlive('1h30m')).toBe(5_400_000);
    expect(parseKeepAlive(10)).toBe(10_000);
    expect(parseKeepAlive('10')).toBe(10_000);
    expect(parseKeepAlive(0)).toBe(0);
    expect(parseKeepAlive(-1)).toBe(Infinity);
    // Signs as Go's durations take them; a sign before something that is not a duration is an error.
    expect(parseKeepAlive('-5m')).toBe(Infinity);
    expect(parseKeepAlive('+5m')).toBe(300_000);
    expect(parseKeepAlive('-0s')).toBe(0);
    for (const bad of ['-garbage', '+', '-', '--5m', '+-1h', '- 5m', '+ 5']) expect(() => parseKeepAlive(bad)).toThrow(`keep_alive: cannot read "${bad.trim()}" as a duration`);
    expect(parseKeepAlive('-1m')).toBe(Infinity);
    expect(() => parseKeepAlive('soon')).toThrow(/keep_alive/);
  });
  it('reads sizes', () => {
    expect(parseBytes('8GiB')).toBe(8 * 1024 ** 3);
    expect(parseBytes('512MB')).toBe(512e6);
    expect(parseBytes('1000')).toBe(1000);
    expect(() => parseBytes('lots')).toThrow();
  });
  it('parses a Bearer challenge', () => {
    expect(parseChallenge('Bearer realm="https://r.io/token",service="r.io",scope="repository:library/x:pull"')).toEqual({ realm: 'https://r.io/token', service: 'r.io', scope: 'repository:library/x:pull' });
    expect(parseChallenge('Basic realm="x"')).toBeUndefined();
  });
});

describe('pull from a registry', () => {
  const weights = readFileSync(fixtureModel(STORIES));
  let reg: FakeRegistry;
  afterEach(() => reg?.stop());

  it('follows the token challenge and the CDN redirect, resumes a dropped blob with Range, and lists the model', async () => {
    reg = await new FakeRegistry({ token: 'tok123', cdn: true, dropOnce: new Set([sha256(weights)]) }).start();
    reg.add({ name: 'library/tiny:latest', layers: [{ mediaType: MODEL, data: weights }] });
    const store = tmp('svc-store-');
    const seen: PullProgress[] = [];
    const name = await new PullService(new ModelCatalog({ storeDir: store, ollamaDir: null }).store, { SVC_REGISTRY_SCHEME: 'http' }).pull(`${reg.host}/library/tiny:latest`, { onProgress: (p) => seen.push(p) });
    expect(name).toBe(`${reg.host}/library/tiny:latest`);
    const statuses = seen.map((p) => p.status);
    expect(statuses[0]).toBe('pulling manifest');
    expect(statuses).toContain(`pulling ${sha256(weights).slice(7, 19)}`);
    expect(statuses.slice(-3)).toEqual(['verifying sha256 digest', 'writing manifest', 'success']);
    expect(reg.requests[0].auth).toBeUndefined(); // first try, then the challenge
    expect(reg.requests.some((r) => r.auth === 'Bearer tok123')).toBe(true);
    const cdnGets = reg.requests.filter((r) => r.server === 'cdn' && r.path.includes(sha256(weights).slice(7)));
    expect(cdnGets.length).toBe(2);
    expect(cdnGets[1].range).toMatch(/^bytes=[1-9]\d*-$/);
    expect(cdnGets.every((r) => r.auth === undefined)).toBe(true); // the token stays with the registry
    const cat = new ModelCatalog({ storeDir: store, ollamaDir: null });
    const e = cat.resolve('');
    expect(e.name).toBe(name);
    expect(e.capabilities).toEqual(['completion']);
    expect(readdirSync(join(store, 'partial'))).toEqual([]);
  });

  it('a wrong digest leaves nothing visible', async () => {
    reg = await new FakeRegistry().start();
    reg.add({ name: 'library/bad:latest', layers: [{ mediaType: MODEL, data: weights, lieDigest: sha256(Buffer.from('other')) }] });
    const store = tmp('svc-store-');
    const svc = new PullService(new ModelCatalog({ storeDir: store, ollamaDir: null }).store, { SVC_REGISTRY_SCHEME: 'http' });
    await expect(svc.pull(`${reg.host}/library/bad`)).rejects.toThrow(/digest mismatch/);
    expect(new ModelCatalog({ storeDir: store, ollamaDir: null }).list()).toEqual([]);
    expect(existsSync(join(store, 'manifests'))).toBe(false);
    expect(readdirSync(join(store, 'blobs')).filter((f) => f.includes(sha256(weights).slice(7)))).toEqual([]);
  });

  it('answers a missing model with a clear error', async () => {
    reg = await new FakeRegistry().start();
    const svc = new PullService(new ModelCatalog({ storeDir: tmp('svc-store-'), ollamaDir: null }).store, { SVC_REGISTRY_SCHEME: 'http' });
    await expect(svc.pull(`${reg.host}/library/nope:latest`)).rejects.toThrow(/file does not exist/);
  });

  it('pulls a plain URL of a GGUF file', async () => {
    const f = await serveFile('/files/Tiny-Stories.gguf', weights);
    try {
      const store = tmp('svc-store-');
      const name = await new PullService(new ModelCatalog({ storeDir: store, ollamaDir: null }).store).pull(f.url);
      expect(name).toBe('tiny-stories:latest');
      expect(new ModelCatalog({ storeDir: store, ollamaDir: null }).resolve('tiny-stories').digest).toBe(sha256(weights));
    } finally {
      await f.stop();
    }
  });
});

describe('blob pins', () => {
  it('a blob two pulls pin outlives the first pull that lets go of it', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-pins-'));
    const store = new ManifestStore(root, true);
    const data = Buffer.from('a blob no manifest lists yet');
    const digest = sha256(data);
    mkdirSync(store.blobsDir, { recursive: true });
    writeFileSync(store.blobPath(digest), data);
    store.pin(digest);
    store.pin(digest); // an aborted pull and its retry
    store.unpin(digest);
    store.dropUnreferenced(digest);
    expect(existsSync(store.blobPath(digest))).toBe(true);
    store.unpin(digest);
    store.dropUnreferenced(digest);
    expect(existsSync(store.blobPath(digest))).toBe(false);
  });
});

describe('temporary files of copies', () => {
  it('a crashed copy\'s file is removed at the next start once stale; recent ones and download parts stay', () => {
    const root = tmp('svc-sweep-');
    const partial = join(root, 'partial');
    mkdirSync(partial, { recursive: true });
    const stale = join(partial, 'sha256-aa.1111.copy');
    const fresh = join(partial, 'sha256-bb.2222.copy');
    const part = join(partial, 'sha256-cc.part0');
    for (const f of [stale, fresh, part]) writeFileSync(f, 'x');
    const old = new Date(Date.now() - STALE_COPY_MS - 60_000);
    utimesSync(stale, old, old);
    utimesSync(part, old, old);
    new ManifestStore(root, false); // the read-only (local-runner's) store is never swept
    expect(existsSync(stale)).toBe(true);
    new ManifestStore(root, true);
    expect(readdirSync(partial).sort()).toEqual(['sha256-bb.2222.copy', 'sha256-cc.part0']);
  });

  it('a download nobody resumed for a week goes at the next start, its files together; locks and pins of processes gone too', () => {
    const root = tmp('svc-sweep-parts-');
    const partial = join(root, 'partial');
    mkdirSync(partial, { recursive: true });
    const names = ['sha256-dd.part0', 'sha256-dd.part3', 'url-ee.joined', 'url-ee.part0.validator', 'url-gg.part0', 'url-gg.part0.validator', 'sha256-ff.part0', 'sha256-hh.lock', 'sha256-ii.pin-a', 'sha256-jj.lock'];
    for (const n of names) writeFileSync(join(partial, n), 'x');
    const weekAgo = new Date(Date.now() - STALE_PART_MS - 60_000);
    for (const n of names.slice(0, 4)) utimesSync(join(partial, n), weekAgo, weekAgo);
    // A part resumed lately keeps its validator, written a week ago at its first bytes (the resume needs it).
    utimesSync(join(partial, 'url-gg.part0.validator'), weekAgo, weekAgo);
    const minuteAgo = new Date(Date.now() - STALE_LOCK_MS - 10_000);
    for (const n of ['sha256-hh.lock', 'sha256-ii.pin-a']) utimesSync(join(partial, n), minuteAgo, minuteAgo);
    new ManifestStore(root, true);
    expect(readdirSync(partial).sort()).toEqual(['sha256-ff.part0', 'sha256-jj.lock', 'url-gg.part0', 'url-gg.part0.validator']);
  });
});

describe('the download lock', () => {
  it('one holder at a time; an empty (just created) lock is waited for; a stale one is taken over', async () => {
    const dir = tmp('svc-lock-');
    const events: string[] = [];
    const hold = (name: string, ms: number) =>
      withDownloadLock(dir, 'k', undefined, async () => {
        events.push(`${name} in`);
        await new Promise((r) => setTimeout(r, ms));
        events.push(`${name} out`);
      });
    await Promise.all([hold('a', 300), hold('b', 10)]);
    expect(events).toEqual(['a in', 'a out', 'b in', 'b out']);
    // A holder between creating its file and writing its token: not stale (it took the lock over, with two holders at once).
    writeFileSync(join(dir, 'k.lock'), '');
    const t0 = Date.now();
    setTimeout(() => rmSync(join(dir, 'k.lock'), { force: true }), 700);
    await hold('c', 1);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(650);
    // A holder that stopped touching its lock (killed; a pid reused or unseen says nothing).
    writeFileSync(join(dir, 'k.lock'), 'gone-host-1-token');
    const old = new Date(Date.now() - STALE_LOCK_MS - 10_000);
    utimesSync(join(dir, 'k.lock'), old, old);
    const t1 = Date.now();
    await hold('d', 1);
    expect(Date.now() - t1).toBeLessThan(400);
    expect(existsSync(join(dir, 'k.lock'))).toBe(false);
  });
});

describe('pins across processes', () => {
  it('a blob another process pinned lately (a fresh partial/<digest>.pin-<token>) is kept; a stale pin is not', () => {
    const root = tmp('svc-pins-');
    const store = new ManifestStore(root, true);
    mkdirSync(store.blobsDir, { recursive: true });
    mkdirSync(store.partialDir, { recursive: true });
    const blob = (text: string) => {
      const data = Buffer.from(text);
      writeFileSync(store.blobPath(sha256(data)), data);
      return sha256(data);
    };
    const kept = blob('pinned by a running process');
    const dropped = blob('pinned by a process that is gone');
    writeFileSync(join(store.partialDir, `${kept.replace(':', '-')}.pin-other-host-1-x`), '');
    // Untouched past its heartbeat: the process that wrote it is gone (whatever its pid is now).
    const deadPin = join(store.partialDir, `${dropped.replace(':', '-')}.pin-other-host-2-y`);
    writeFileSync(deadPin, '');
    const old = new Date(Date.now() - STALE_LOCK_MS - 10_000);
    utimesSync(deadPin, old, old);
    store.dropUnreferenced(kept);
    store.dropUnreferenced(dropped);
    expect([existsSync(store.blobPath(kept)), existsSync(store.blobPath(dropped)), existsSync(deadPin)]).toEqual([true, false, false]);
    // This process's own pins are files too, gone with the last unpin.
    const own = () => readdirSync(store.partialDir).filter((n) => n.startsWith(`${dropped.replace(':', '-')}.pin-`));
    store.pin(dropped);
    store.pin(dropped);
    store.unpin(dropped);
    expect(own()).toHaveLength(1);
    store.unpin(dropped);
    expect(own()).toEqual([]);
  });
});

describe('names that differ in case only', () => {
  it('are one model: writing `Mine` replaces `mine`, and one delete removes it', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-case-'));
    const store = new ManifestStore(root, true);
    const blob = (text: string) => {
      const data = Buffer.from(text);
      mkdirSync(store.blobsDir, { recursive: true });
      writeFileSync(store.blobPath(sha256(data)), data);
      return { mediaType: 'application/vnd.ollama.image.model', digest: sha256(data), size: data.length };
    };
    const a = blob('first weights');
    const b = blob('second weights');
    store.writeManifest(parseModelRef('mine'), { schemaVersion: 2, mediaType: 'x', layers: [a] });
    store.writeManifest(parseModelRef('Mine'), { schemaVersion: 2, mediaType: 'x', layers: [b] });
    expect(store.list().map((m) => [m.name, m.manifest.layers[0].digest])).toEqual([['Mine:latest', b.digest]]);
    expect(existsSync(store.blobPath(a.digest))).toBe(false);
    store.writeManifest(parseModelRef('MINE:Latest'), { schemaVersion: 2, mediaType: 'x', layers: [b] });
    expect(store.list()).toHaveLength(1);
    store.remove(store.find('mine')!);
    expect(store.list()).toEqual([]);
  });
});

describe('the -m file', () => {
  it('is looked at again (size, modification time) at most once per DEFAULT_FILE_RECHECK_MS', async () => {
    const dir = tmp('svc-m-');
    const file = join(dir, 'mine.gguf');
    copyFileSync(fixtureModel(STORIES), file);
    const cat = new ModelCatalog({ storeDir: tmp('svc-store-'), ollamaDir: null, defaultModel: file });
    const first = cat.resolve('');
    expect(first.name).toBe('mine');
    expect(cat.resolve('mine')).toBe(first); // the same entry, kept
    // Replaced within the window: the kept entry still answers.
    writeFileSync(file, Buffer.concat([readFileSync(fixtureModel(STORIES)), Buffer.alloc(64)]));
    expect(cat.resolve('')).toBe(first);
    await new Promise((r) => setTimeout(r, DEFAULT_FILE_RECHECK_MS + 50));
    const again = cat.resolve('');
    expect(again).not.toBe(first);
    expect(again.sizeBytes).toBe(first.sizeBytes + 64);
  });
});

describe('catalog over both stores', () => {
  const weights = readFileSync(fixtureModel(STORIES));
  const mmproj = readFileSync(fixtureModel('mmproj-tinygemma3.gguf'));

  function setup() {
    const ollama = tmp('ollama-');
    writeOllamaModel(ollama, 'llama3:latest', [
      { mediaType: MODEL, data: weights },
      { mediaType: 'application/vnd.ollama.image.template', data: Buffer.from('{{ .Prompt }}') },
      { mediaType: 'application/vnd.ollama.image.params', data: Buffer.from('{"stop":["<|eot_id|>","x"],"temperature":0.6}') },
      { mediaType: 'application/vnd.ollama.image.system', data: Buffer.from('Be brief.') },
    ]);
    writeOllamaModel(ollama, 'me/tiny:q8', [{ mediaType: MODEL, data: weights }]);
    writeOllamaModel(ollama, 'example.com/ns/vision:1', [{ mediaType: 'application/vnd.ollama.image.projector', data: mmproj }]);
    writeOllamaModel(ollama, 'mylora:latest', [{ mediaType: MODEL, data: weights }, { mediaType: 'application/vnd.ollama.image.adapter', data: mmproj }]);
    const store = tmp('svc-store-');
    copyFileSync(fixtureModel(STORIES), join(store, 'flat.gguf'));
    return { ollama, store, cat: new ModelCatalog({ storeDir: store, ollamaDir: ollama }) };
  }

  it('lists the union with Ollama names, adapters and projectors', () => {
    const { cat } = setup();
    const byName = Object.fromEntries(cat.list().map((e) => [e.name, e]));
    expect(Object.keys(byName).sort()).toEqual(['example.com/ns/vision:1', 'flat', 'llama3:latest', 'llama3:latest+mylora:latest', 'me/tiny:q8'].sort());
    expect(byName['llama3:latest'].source).toBe('ollama');
    expect(byName['llama3:latest'].capabilities).toEqual(['completion']);
    expect(byName['example.com/ns/vision:1'].capabilities).toEqual([]);
    expect(byName['llama3:latest+mylora:latest'].capabilities).toEqual([]);
    expect(cat.defaults(byName['llama3:latest'])).toEqual({ options: { stop: ['<|eot_id|>', 'x'], temperature: 0.6 }, system: 'Be brief.' });
    expect(cat.defaults(byName['me/tiny:q8'])).toEqual({ options: {} });
    expect(cat.defaults(byName.flat)).toEqual({ options: {} });
    expect(cat.resolve('llama3').name).toBe('llama3:latest');
    expect(() => cat.resolve('nope')).toThrow(/llama3:latest \(ollama\)/);
  });

  it('copies and deletes in its own store only, and never writes the Ollama store', async () => {
    const { ollama, store, cat } = setup();
    const before = hashTree(ollama);
    const admin = new StoreAdmin(cat);
    expect(() => admin.delete('llama3')).toThrow("llama3:latest belongs to the local-runner's store, which svc only reads");
    await admin.copy('llama3', 'llama3'); // same name in svc's store: svc's wins
    expect(cat.resolve('llama3').source).toBe('svc');
    await admin.copy('llama3', 'mine/copy:v1');
    await expect(admin.copy('llama3', '../escape')).rejects.toThrow(/invalid model name/);
    admin.delete('llama3:latest');
    expect(cat.resolve('llama3').source).toBe('ollama');
    // the blob is still used by mine/copy:v1
    expect(existsSync(cat.store.blobPath(sha256(weights)))).toBe(true);
    admin.delete('mine/copy:v1');
    expect(existsSync(cat.store.blobPath(sha256(weights)))).toBe(false);
    await admin.copy('flat', 'flatcopy');
    expect(cat.resolve('flatcopy:latest').source).toBe('svc');
    expect(hashTree(ollama)).toBe(before);
    writeFileSync(join(store, 'manifests', 'registry.ollama.ai', 'library', 'flatcopy', 'broken'), '{not json');
    expect(cat.list().some((e) => e.name === 'flatcopy:broken')).toBe(false);
  });
});

describe('memory estimate of a vision model', () => {
  it('counts the projector loaded beside the weights (-memory-budget left it out)', () => {
    const mmproj = fixtureModel('mmproj-tinygemma3.gguf');
    const entry = { name: 'v', path: '/x.gguf', sizeBytes: 1000 } as unknown as CatalogEntry;
    expect(estimateBytes(entry, 0)).toBe(1000);
    expect(estimateBytes({ ...entry, projector: mmproj } as CatalogEntry, 0)).toBe(1000 + statSync(mmproj).size);
  });
});
