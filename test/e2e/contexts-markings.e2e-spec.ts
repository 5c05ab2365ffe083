/**
 * Contexts under callers and classification markings (issue 7) and the legacy
 * snapshot policy (issue 6), against the real server process.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

const PROMPT = 'Once upon a time, there was a little girl named Lily. She loved to play outside.';
const FOREIGN = 'the context belongs to another caller, or to you at another marking';
const LEGACY = /^a snapshot from before version 0\.3\.0 names its weights by layout only; refused here unless the server runs with -allow-legacy-snapshots$/;

const dir = mkdtempSync(join(tmpdir(), 'svc-ctx-markings-'));
const callersFile = join(dir, 'callers.json');
writeFileSync(
  callersFile,
  JSON.stringify({
    callers: [
      { name: 'alice', keys: ['alice-key'], clearance: 'SECRET', compartments: ['ALPHA'] },
      { name: 'bob', keys: ['bob-key'], clearance: 'TOP SECRET', compartments: ['ALPHA'] },
    ],
  }),
);

/** A fetch Response whose JSON is read untyped, as the assertions below do. */
type Answer = Omit<Response, 'json'> & { json(): Promise<any> };

/** One request as a caller at a marking (either may be omitted). */
function call(srv: RunningServer, method: string, path: string, o: { key?: string; marking?: string; json?: unknown; file?: Buffer } = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  if (o.marking) headers['x-classification'] = o.marking;
  if (o.json !== undefined) headers['content-type'] = 'application/json';
  if (o.file) headers['content-type'] = 'application/octet-stream';
  return fetch(`${srv.url}${path}`, { method, headers, body: o.file ?? (o.json !== undefined ? JSON.stringify(o.json) : undefined) });
}

const bytes = async (r: Answer) => {
  expect(r.status).toBe(200);
  return Buffer.from(await r.arrayBuffer());
};

/**
 * A pre-0.3.0 file made from a current unsealed one (SNAPSHOT-FORMAT.md): version 1 in the
 * prefix and a header that names the weights by layout only (no `weights`).
 */
function legacyOf(file: Buffer, edit: (h: Record<string, unknown>) => void = () => undefined): Buffer {
  expect(file.readUInt16LE(8)).toBe(2);
  expect(file.readUInt16LE(10)).toBe(0); // not sealed
  const hLen = file.readUInt32LE(12);
  const header = JSON.parse(file.toString('utf8', 16, 16 + hLen));
  expect(header.weights).toMatch(/^sha256:[0-9a-f]{64}$/);
  delete header.weights;
  header.svc_version = '0.2.0';
  edit(header);
  const h = Buffer.from(JSON.stringify(header));
  const prefix = Buffer.from(file.subarray(0, 16));
  prefix.writeUInt16LE(1, 8);
  prefix.writeUInt32LE(h.length, 12);
  return Buffer.concat([prefix, h, file.subarray(16 + hLen)]);
}

describe('contexts under classification markings (-profile enterprise)', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '1', '-profile', 'enterprise', '-insecure', '-callers', callersFile]);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('shows a context only at the marking it was made at', async () => {
    const made = await call(srv, 'POST', '/v1/contexts', { key: 'alice-key', marking: 'SECRET', json: { prompt: PROMPT } });
    expect(made.status).toBe(201);
    expect(made.headers.get('x-classification')).toBe('SECRET');
    const ctx: any = await made.json();
    const at = (marking: string) => call(srv, 'GET', `/v1/contexts/${ctx.id}`, { key: 'alice-key', marking });
    expect((await at('secret')).status).toBe(200); // the same marking, spelt otherwise
    expect((await at('CONFIDENTIAL')).status).toBe(404);
    expect((await at('SECRET//ALPHA')).status).toBe(404);
    const listed = async (marking: string) => (await (await call(srv, 'GET', '/v1/contexts', { key: 'alice-key', marking })).json()).data.map((c: any) => c.id);
    expect(await listed('SECRET')).toContain(ctx.id);
    expect(await listed('CONFIDENTIAL')).not.toContain(ctx.id);
    // Bob is cleared above SECRET, yet the context is alice's.
    expect((await call(srv, 'GET', `/v1/contexts/${ctx.id}`, { key: 'bob-key', marking: 'SECRET' })).status).toBe(404);
  });

  it('refuses an import across markings or callers (403) and admits the same caller at the same marking', async () => {
    const ctx: any = await (await call(srv, 'POST', '/v1/contexts', { key: 'alice-key', marking: 'SECRET//ALPHA', json: { prompt: PROMPT } })).json();
    const exported = await bytes(await call(srv, 'GET', `/v1/contexts/${ctx.id}/export`, { key: 'alice-key', marking: 'SECRET//ALPHA' }));
    for (const [key, marking] of [
      ['alice-key', 'SECRET'], // lower: the file would reach a marking without the compartment
      ['alice-key', 'CONFIDENTIAL//ALPHA'],
      ['bob-key', 'SECRET//ALPHA'], // another caller at the same marking
      ['bob-key', 'TOP SECRET//ALPHA'], // another caller, higher
    ]) {
      const r = await call(srv, 'POST', '/v1/contexts/import', { key, marking, file: exported });
      expect([key, marking, r.status]).toEqual([key, marking, 403]);
      expect((await r.json()).error.message).toBe(FOREIGN);
      expect(r.headers.get('x-classification')).toBe(marking);
    }
    // Nothing was created by the refused imports.
    const bobs = await (await call(srv, 'GET', '/v1/contexts', { key: 'bob-key', marking: 'SECRET//ALPHA' })).json();
    expect(bobs.data).toEqual([]);

    const ok = await call(srv, 'POST', '/v1/contexts/import', { key: 'alice-key', marking: 'SECRET//ALPHA', file: exported });
    expect(ok.status).toBe(201);
    const imported: any = await ok.json();
    expect(imported).toMatchObject({ from: ctx.id, tokens: ctx.tokens, parent: '' });
    expect((await call(srv, 'GET', `/v1/contexts/${imported.id}`, { key: 'bob-key', marking: 'SECRET//ALPHA' })).status).toBe(404);
  });

  it('refuses restore of a bare snapshot under markings, and legacy exports under the enterprise profile', async () => {
    const who = { key: 'alice-key', marking: 'SECRET' };
    const ctx: any = await (await call(srv, 'POST', '/v1/contexts', { ...who, json: { prompt: PROMPT } })).json();
    const snap = await bytes(await call(srv, 'GET', `/v1/contexts/${ctx.id}/snapshot`, who));
    const restore = await call(srv, 'POST', '/v1/contexts/restore', { ...who, file: snap });
    expect(restore.status).toBe(403);
    expect((await restore.json()).error.message).toBe('restore of a bare snapshot is refused under classification markings; use export and import');

    const exported = await bytes(await call(srv, 'GET', `/v1/contexts/${ctx.id}/export`, who));
    const legacy = await call(srv, 'POST', '/v1/contexts/import', { ...who, file: legacyOf(exported) });
    expect(legacy.status).toBe(403);
    expect((await legacy.json()).error.message).toMatch(LEGACY);
    expect((await call(srv, 'POST', '/v1/contexts/import', { ...who, file: exported })).status).toBe(201);
  });
});

describe('legacy (pre-0.3.0) snapshots', () => {
  const servers: RunningServer[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });
  const start = async (...flags: string[]) => {
    const s = await startServer(['-m', fixtureModel(STORIES), '-threads', '1', ...flags]);
    servers.push(s);
    return s;
  };
  const snapshotOn = async (srv: RunningServer, o: { key?: string; marking?: string } = {}) => {
    const ctx: any = await (await call(srv, 'POST', '/v1/contexts', { ...o, json: { prompt: PROMPT } })).json();
    return { ctx, snap: await bytes(await call(srv, 'GET', `/v1/contexts/${ctx.id}/snapshot`, o)) };
  };

  it('are accepted on a plain server when the layout matches, refused (409) when it does not', async () => {
    const srv = await start();
    const { ctx, snap } = await snapshotOn(srv);
    const r = await call(srv, 'POST', '/v1/contexts/restore', { file: legacyOf(snap) });
    expect(r.status).toBe(201);
    expect((await r.json()).tokens).toBe(ctx.tokens);
    const other = await call(srv, 'POST', '/v1/contexts/restore', { file: legacyOf(snap, (h) => (h.layout = 'llama/L5/E64/H8/KV4/V999')) });
    expect(other.status).toBe(409);
    expect((await other.json()).error.message).toMatch(/^kv: snapshot was taken with different weights: snapshot holds llama\/L5\/E64\/H8\/KV4\/V999, this cache holds sha256:270cba1b/);
  });

  const exportOn = async (srv: RunningServer) => {
    const ctx: any = await (await call(srv, 'POST', '/v1/contexts', { json: { prompt: PROMPT } })).json();
    return bytes(await call(srv, 'GET', `/v1/contexts/${ctx.id}/export`));
  };

  it('are refused wherever markings are on (the auth layer\'s policy), even on an undeclared request', async () => {
    const srv = await start('-classification', '-require-classification=false');
    const exported = await exportOn(srv);
    expect((await call(srv, 'POST', '/v1/contexts/import', { file: exported })).status).toBe(201);
    const r = await call(srv, 'POST', '/v1/contexts/import', { file: legacyOf(exported) });
    expect(r.status).toBe(403);
    expect((await r.json()).error.message).toMatch(LEGACY);
    // A bare snapshot carries no marking: restoring it, declared or not, would drop the one it was taken at.
    const bare = await call(srv, 'POST', '/v1/contexts/restore', { file: (await snapshotOn(srv)).snap });
    expect(bare.status).toBe(403);
    expect((await bare.json()).error.message).toBe('restore of a bare snapshot is refused under classification markings; use export and import');
  });

  it('are accepted under markings and the enterprise profile with -allow-legacy-snapshots', async () => {
    const plain = await start('-classification', '-require-classification=false', '-allow-legacy-snapshots');
    expect((await call(plain, 'POST', '/v1/contexts/import', { file: legacyOf(await exportOn(plain)) })).status).toBe(201);

    const ent = await start('-profile', 'enterprise', '-insecure', '-callers', callersFile, '-allow-legacy-snapshots');
    const who = { key: 'alice-key', marking: 'SECRET' };
    const ctx: any = await (await call(ent, 'POST', '/v1/contexts', { ...who, json: { prompt: PROMPT } })).json();
    const exported = await bytes(await call(ent, 'GET', `/v1/contexts/${ctx.id}/export`, who));
    const r = await call(ent, 'POST', '/v1/contexts/import', { ...who, file: legacyOf(exported) });
    expect(r.status).toBe(201);
    expect(await r.json()).toMatchObject({ from: ctx.id, tokens: ctx.tokens });
    // A legacy file still carries its owner and marking: the ownership rule holds for it too.
    const bob = await call(ent, 'POST', '/v1/contexts/import', { key: 'bob-key', marking: 'SECRET', file: legacyOf(exported) });
    expect(bob.status).toBe(403);
  });
});

describe('sealed exports between callers (-context-key)', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '1', '-callers', callersFile, '-context-key', 'ctx-key-for-tests']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it("a sealed export handed to another caller neither reveals nor becomes that caller's context", async () => {
    const ctx: any = await (await call(srv, 'POST', '/v1/contexts', { key: 'alice-key', json: { prompt: PROMPT } })).json();
    const exported = await bytes(await call(srv, 'GET', `/v1/contexts/${ctx.id}/export`, { key: 'alice-key' }));
    // The owner, the model and the tokens are inside the authenticated ciphertext.
    expect(exported.includes(Buffer.from('alice'))).toBe(false);
    expect(exported.includes(Buffer.from('"owner"'))).toBe(false);
    const r = await call(srv, 'POST', '/v1/contexts/import', { key: 'bob-key', file: exported });
    expect(r.status).toBe(403);
    expect((await r.json()).error.message).toBe(FOREIGN);
    // Editing any byte (say, to rename the owner) breaks the seal.
    const edited = Buffer.from(exported);
    edited[40] ^= 0x01;
    const t = await call(srv, 'POST', '/v1/contexts/import', { key: 'bob-key', file: edited });
    expect(t.status).toBe(400);
    expect((await t.json()).error.message).toBe('sealed context file failed authentication: tampered, or sealed with another key');
    expect((await (await call(srv, 'GET', '/v1/contexts', { key: 'bob-key' })).json()).data).toEqual([]);
    expect((await call(srv, 'POST', '/v1/contexts/import', { key: 'alice-key', file: exported })).status).toBe(201);
  });
});
