/**
 * `svc pull` through a running server that has keys or serves HTTPS: the command sends the key
 * (-api-key, else $SVC_API_KEY) and speaks HTTPS when given the server's certificate or CA
 * (-tls-cert). Only a refused connection pulls into the local -store; any other failure to talk
 * to the server is an error (it once pulled into a store the server never reads, and said success).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, fixtureModel, STORIES, syntheticModel } from './helpers/fixtures';
import { FakeRegistry, serveFile, sha256 } from './helpers/fake-registry';
import { aliceAndBobCallers, freePort, RunningServer, startServer, TlsClientOptions } from './helpers/server';
import { AuthFiles, send } from './helpers/auth';

jest.setTimeout(120_000);

const NAME = 'stories260k:latest';

/** Runs `svc pull` (asynchronously: the file server it downloads from lives in this process). */
function svcPull(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stderr: string }> {
  const base = { ...process.env };
  for (const k of ['SVC_API_KEY', 'SVC_ADDR', 'SVC_STORE']) delete base[k];
  const proc = spawn(process.execPath, [join(ROOT, 'bin', 'svc.js'), 'pull', ...args], { cwd: ROOT, env: { ...base, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve) => proc.on('close', (code) => resolve({ code, stderr })));
}

/** The names of the models in a store folder (manifests/<host>/<ns>/<model>/<tag>). */
function stored(store: string): string[] {
  const dir = join(store, 'manifests');
  if (!existsSync(dir)) return [];
  return (readdirSync(dir, { recursive: true }) as string[]).filter((p) => p.split('/').length === 4).map((p) => p.split('/').slice(2).join(':'));
}

async function served(srv: RunningServer, headers: Record<string, string>, tls?: TlsClientOptions): Promise<string[]> {
  const a = await send(`${srv.url}/api/tags`, { headers, tls });
  expect(a.status).toBe(200);
  return a.json.models.map((m: { name: string }) => m.name);
}

describe('svc pull', () => {
  let file: { url: string; stop: () => Promise<void> };
  let srv: RunningServer | undefined;
  const env = { OLLAMA_MODELS: mkdtempSync(join(tmpdir(), 'ollama-')) };
  const start = async (args: string[], tls?: TlsClientOptions) => (srv = await startServer(['-threads', '1', '-concurrency', '2', ...args], { env, tls }));
  const localStore = () => mkdtempSync(join(tmpdir(), 'svc-pull-local-'));
  beforeAll(async () => (file = await serveFile('/stories260K.gguf', readFileSync(fixtureModel(STORIES)))));
  afterAll(async () => {
    await srv?.stop();
    await file?.stop();
  });

  describe('a server with keys (-api-key and a callers file)', () => {
    beforeAll(() => start(['-api-key', 'k1', '-callers', aliceAndBobCallers()]));
    afterAll(async () => void (await srv?.stop()));
    const addr = () => `127.0.0.1:${srv!.port}`;

    it('without a key: the 401 is the error, with where the key comes from; nothing is pulled locally', async () => {
      const store = localStore();
      const r = await svcPull([file.url, '-addr', addr(), '-store', store]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('this server requires an API key');
      expect(r.stderr).toContain('-api-key, else $SVC_API_KEY');
      expect(stored(store)).toEqual([]);
    });

    it('$SVC_API_KEY is sent: the running server pulls it and lists it', async () => {
      const store = localStore();
      const r = await svcPull([file.url, '-addr', addr(), '-store', store], { SVC_API_KEY: 'k1' });
      expect(r.stderr).not.toContain('svc: pull');
      expect(r.code).toBe(0);
      expect(await served(srv!, { authorization: 'Bearer k1' })).toContain(NAME);
      expect(stored(store)).toEqual([]);
    });

    it("-api-key carries a callers-file caller's key (and wins over $SVC_API_KEY); a wrong key is an error", async () => {
      const store = localStore();
      const ok = await svcPull([file.url, '-addr', addr(), '-store', store, '-api-key', 'alice-key'], { SVC_API_KEY: 'wrong' });
      expect(ok.stderr).not.toContain('svc: pull');
      expect(ok.code).toBe(0);
      const bad = await svcPull([file.url, '-addr', addr(), '-store', store], { SVC_API_KEY: 'wrong' });
      expect(bad.code).toBe(1);
      expect(bad.stderr).toContain('the key from -api-key or $SVC_API_KEY was refused');
      expect(stored(store)).toEqual([]);
    });
  });

  describe('a server on HTTPS (-tls-cert)', () => {
    const files = new AuthFiles().writeCertificates();
    const tls = { ca: files.pem('server-ca.pem') };
    beforeAll(() => start(['-tls-cert', files.file('server.pem'), '-tls-key', files.file('server.key')], tls));
    afterAll(async () => void (await srv?.stop()));
    const addr = () => `127.0.0.1:${srv!.port}`;

    it('without -tls-cert: an error naming the flag, never a "success" pulled into another store', async () => {
      const store = localStore();
      const r = await svcPull([file.url, '-addr', addr(), '-store', store]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`cannot talk to the server at ${addr()}`);
      expect(r.stderr).toContain('-tls-cert');
      expect(stored(store)).toEqual([]);
      expect(await served(srv!, {}, tls)).not.toContain(NAME);
    });

    it("with the server's own certificate (pinned; -addr 0.0.0.0 means loopback): pulled by the server", async () => {
      const store = localStore();
      const r = await svcPull([file.url, '-addr', `0.0.0.0:${srv!.port}`, '-store', store, '-tls-cert', files.file('server.pem')]);
      expect(r.stderr).not.toContain('svc: pull');
      expect(r.code).toBe(0);
      expect(await served(srv!, {}, tls)).toContain(NAME);
      expect(stored(store)).toEqual([]);
    });

    it('with the CA that signed it: pulled by the server; a CA that did not is an error', async () => {
      const store = localStore();
      const ok = await svcPull([file.url, '-addr', addr(), '-store', store, '-tls-cert', files.file('server-ca.pem')]);
      expect(ok.stderr).not.toContain('svc: pull');
      expect(ok.code).toBe(0);
      const rogue = await svcPull([file.url, '-addr', addr(), '-store', store, '-tls-cert', files.file('rogue-ca.pem')]);
      expect(rogue.code).toBe(1);
      expect(rogue.stderr).toContain(`its certificate is neither in ${files.file('rogue-ca.pem')}`);
      expect(stored(store)).toEqual([]);
    });
  });

  it('nothing listening at -addr (connection refused): pulled straight into -store', async () => {
    const store = localStore();
    const r = await svcPull([file.url, '-addr', `127.0.0.1:${await freePort()}`, '-store', store, '-api-key', 'k1']);
    expect(r.stderr).not.toContain('svc: pull');
    expect(r.code).toBe(0);
    expect(stored(store)).toEqual([NAME]);
  });
});

describe('two svc pulls into one store at once (no server at the address)', () => {
  it('both succeed: one waits for the other to download, and neither deletes what the other fetched', async () => {
    const weights = readFileSync(syntheticModel('qwen2.5-tiny'));
    // About 40 MB/s: the second starts while the first is still downloading.
    const reg = await new FakeRegistry({ throttle: 2 * 1024 * 1024 }).start();
    try {
      reg.add({ name: 'library/both:latest', layers: [{ mediaType: 'application/vnd.ollama.image.model', data: weights }] });
      const store = mkdtempSync(join(tmpdir(), 'svc-pull-twice-'));
      const args = [`127.0.0.1:${reg.port}/library/both`, '-addr', `127.0.0.1:${await freePort()}`, '-store', store];
      const env = { SVC_REGISTRY_SCHEME: 'http' };
      // Both appended to one part file, and one's cleanup deleted the other's blob: both failed, the store empty.
      const [a, b] = await Promise.all([svcPull(args, env), new Promise((r) => setTimeout(r, 300)).then(() => svcPull(args, env))]);
      expect([a.code, a.stderr.trim().split('\n').pop(), b.code, b.stderr.trim().split('\n').pop()]).toEqual([0, 'success', 0, 'success']);
      expect(stored(store)).toEqual(['both:latest']);
      expect(sha256(readFileSync(join(store, 'blobs', sha256(weights).replace(':', '-'))))).toBe(sha256(weights));
      // No lock, pin or part left behind.
      expect(readdirSync(join(store, 'partial'))).toEqual([]);
    } finally {
      await reg.stop();
    }
  });
});
