/**
 * Classification markings, browser origins (CORS, Host and Origin checks) and
 * the enterprise profile, against the real server process (libs/auth).
 */
import { spawnSync } from 'node:child_process';
import { connect } from 'node:net';
import { join } from 'node:path';
import { AuthFiles, expectOpenHealth, expectUnauthorized, ROUTES, send } from './helpers/auth';
import { fixtureModel, ROOT, STORIES } from './helpers/fixtures';
import { aliceAndBobCallers, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

/** Sends a request head (no body) and returns what the server wrote before closing. */
function rawRequest(url: string, head: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let out = '';
    const sock = connect(Number(port), hostname, () => sock.write(head));
    sock.on('data', (d) => {
      out += d.toString('latin1');
      // One answer is all this asks for; the server may wait for a body that never comes.
      if (/\r\n\r\n/.test(out) && /"error"/.test(out)) sock.destroy();
    });
    sock.on('close', () => resolve(out));
    sock.on('error', reject);
    setTimeout(() => sock.destroy(), 10_000).unref();
  });
}

const model = () => fixtureModel(STORIES);
const files = new AuthFiles();
const { file } = files;

beforeAll(() => files.writeCallers());

describe('classification markings', () => {
  let srv: RunningServer;
  beforeAll(async () => (srv = await startServer(['-m', model(), '-threads', '2', '-callers', file('callers.yaml'), '-classification'])));
  afterAll(() => srv?.stop());
  const as = (key: string, marking?: string) => ({ 'x-api-key': key, ...(marking !== undefined ? { 'x-classification': marking } : {}) });

  it('admits a cleared request and echoes X-Classification', async () => {
    const chat = await send(`${srv.url}/v1/chat/completions`, { method: 'POST', body: ROUTES[1].body, headers: as('alice-key', 'SECRET//HCS') });
    expect(chat.status).toBe(200);
    expect(chat.headers['x-classification']).toBe('SECRET//HCS');
    // A streamed answer writes its own head: it carries the echo too.
    const streamed = await send(`${srv.url}/v1/chat/completions`, { method: 'POST', body: { ...(ROUTES[1].body as object), stream: true }, headers: as('alice-key', 'SECRET//HCS') });
    expect(streamed.status).toBe(200);
    expect(streamed.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(streamed.headers['x-classification']).toBe('SECRET//HCS');
    const v = await send(`${srv.url}/api/version`, { headers: as('alice-key', 'confidential') });
    expect(v.status).toBe(200);
    expect(v.headers['x-classification']).toBe('confidential');
  });

  it.each([
    ['alice-key', undefined, 403, 'the server requires every request to declare its classification'],
    ['alice-key', 'TOP SECRET', 403, 'alice is cleared to SECRET and this request is TOP SECRET'],
    ['alice-key', 'SECRET//HCS/SI', 403, 'alice is not read into SI'],
    ['carol-key', 'UNCLASSIFIED', 403, 'carol holds no clearance on this server'],
    ['alice-key', 'SECRET//', 400, 'malformed X-Classification "SECRET//": empty compartment name'],
    ['alice-key', 'NOT A LEVEL', 400, 'malformed X-Classification "NOT A LEVEL": unknown level "NOT A LEVEL"; levels are UNCLASSIFIED, CONFIDENTIAL, SECRET, TOP SECRET'],
  ])('%s with %j → %d', async (key, marking, status, message) => {
    for (const route of ROUTES) {
      const a = await send(`${srv.url}${route.path}`, { method: route.method, body: route.body, headers: as(key, marking) });
      expect(a.status).toBe(status);
      expect(a.json).toEqual(route.path.startsWith('/api/') ? { error: message } : { error: { message, type: status === 400 ? 'Bad Request' : 'Forbidden' } });
      expect(a.headers['x-classification']).toBe(marking);
    }
  });

  it('a body over the limit is refused after the credential: 401 without one, a 413 with the echo with one', async () => {
    // The declared length decided first: the 413 went to anyone, without the echo.
    const big = (headers: Record<string, string>) =>
      rawRequest(srv.url, `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40000000\r\nConnection: close\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`);
    const anon = await big({ 'X-Classification': 'SECRET' });
    expect(anon).toMatch(/^HTTP\/1\.1 401 /);
    const ok = await big({ 'x-api-key': 'alice-key', 'X-Classification': 'SECRET' });
    expect(ok).toMatch(/^HTTP\/1\.1 413 /);
    expect(ok).toMatch(/\r\nx-classification: SECRET\r\n/i);
    expect(ok).toContain('request body is 40000000 bytes; this server accepts');
  });

  it('echoes on 401 as well; healthz needs neither key nor marking', async () => {
    const a = await send(`${srv.url}/v1/models`, { headers: { 'x-classification': 'SECRET' } });
    expectUnauthorized(a, '/v1/models');
    expect(a.headers['x-classification']).toBe('SECRET');
    await expectOpenHealth(srv);
  });
});

describe('browser origins', () => {
  let srv: RunningServer;
  beforeAll(async () => (srv = await startServer(['-m', model(), '-threads', '2', '-cors', 'https://app.example', '-api-key', 'k1'])));
  afterAll(() => srv?.stop());
  const preflight = (origin: string, path = '/v1/chat/completions') =>
    send(`${srv.url}${path}`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' } });

  it('preflight from a permitted origin: 204 with CORS headers', async () => {
    const a = await preflight('https://app.example');
    expect(a.status).toBe(204);
    expect(a.text).toBe('');
    expect(a.headers['access-control-allow-origin']).toBe('https://app.example');
    expect(a.headers['access-control-allow-methods']).toMatch(/POST/);
    expect(a.headers['access-control-allow-headers']).toBe('authorization, content-type');
  });

  it('preflight from any other origin: 204, no CORS headers, no body', async () => {
    for (const path of ['/v1/chat/completions', '/api/pull', '/no/such/route']) {
      const a = await preflight('https://evil.example', path);
      expect(a.status).toBe(204);
      expect(a.text).toBe('');
      expect(Object.keys(a.headers).filter((k) => k.startsWith('access-control-'))).toEqual([]);
    }
  });

  it('mutations from an origin not in -cors: 403 with the spec messages', async () => {
    const headers = { origin: 'https://evil.example', authorization: 'Bearer k1' };
    const chat = await send(`${srv.url}/v1/chat/completions`, { method: 'POST', body: ROUTES[1].body, headers });
    expect(chat.status).toBe(403);
    expect(chat.json).toEqual({ error: { message: 'origin not permitted; a web page at https://evil.example may not call this server', type: 'Forbidden' } });
    // Percent-escapes reach the same routes: the rule reads the path as the router does.
    for (const [method, path] of [['POST', '/api/pull'], ['POST', '/api/copy'], ['DELETE', '/api/delete'], ['POST', '/api/%70ull'], ['POST', '/%61pi/copy?x=1']]) {
      const a = await send(`${srv.url}${path}`, { method, body: { model: 'x' }, headers });
      expect(a.status).toBe(403);
      expect(a.json).toEqual({ error: "a web page at https://evil.example may not change this server's model store" });
    }
    // GET is not a mutation; the permitted origin and the server's own origin may post.
    expect((await send(`${srv.url}/v1/models`, { headers })).status).toBe(200);
    const ok = await send(`${srv.url}/v1/chat/completions`, { method: 'POST', body: ROUTES[1].body, headers: { ...headers, origin: 'https://app.example' } });
    expect(ok.status).toBe(200);
    expect(ok.headers['access-control-allow-origin']).toBe('https://app.example');
    const own = await send(`${srv.url}/v1/chat/completions`, { method: 'POST', body: ROUTES[1].body, headers: { ...headers, origin: srv.url } });
    expect(own.status).toBe(200);
    // A DNS name rebound to this address is not the server's own origin.
    const rebound = await send(`${srv.url}/v1/chat/completions`, {
      method: 'POST',
      body: ROUTES[1].body,
      headers: { ...headers, origin: `http://rebound.example:${srv.port}`, host: `rebound.example:${srv.port}` },
    });
    expect(rebound.status).toBe(403);
  });

  it('studio: Host and Origin must name this machine; MCP: an Origin must be its own (any Host, with the key)', async () => {
    const auth = { authorization: 'Bearer k1' };
    // A keyed client may name the server as it reaches it (a cluster service, a proxy): the Host
    // rule is for keyless servers (a rebound page holds no key); the SDK then reads the body.
    const mcpHost = await send(`${srv.url}/mcp`, { method: 'POST', body: {}, headers: { ...auth, host: `svc.cluster.example:${srv.port}` } });
    expect(mcpHost.status).toBe(400);
    const mcpOrigin = await send(`${srv.url}/mcp`, { method: 'POST', body: {}, headers: { ...auth, origin: 'https://app.example' } });
    expect(mcpOrigin.status).toBe(403);
    expect(mcpOrigin.json.error.message).toBe('origin not permitted; a web page at https://app.example may not call this server');
    const studio = await send(`${srv.url}/studio`, { headers: { ...auth, host: `rebound.example:${srv.port}` } });
    expect(studio.status).toBe(421);
    expect(studio.json).toEqual({ error: { message: 'Studio answers this machine only', type: 'Misdirected Request' } });
    // Addressed as localhost the check passes, to the 404 of a server without -studio.
    expect((await send(`${srv.url}/studio`, { headers: { ...auth, host: `localhost:${srv.port}` } })).status).toBe(404);
  });
});

describe('a keyless server and DNS rebinding', () => {
  let srv: RunningServer;
  beforeAll(async () => (srv = await startServer(['-m', model(), '-threads', '1', '-cors', 'https://app.example'])));
  afterAll(() => srv?.stop());

  it('a loopback request whose Host names another machine is refused: a rebound page read every context with GET', async () => {
    const made = await send(`${srv.url}/v1/contexts`, { method: 'POST', body: { prompt: 'my bank password is hunter2' } });
    expect(made.status).toBe(201);
    for (const path of ['/v1/contexts', `/v1/contexts/${made.json.id}/export`, '/api/tags', '/metrics']) {
      const rebound = await send(`${srv.url}${path}`, { headers: { host: `rebound.example:${srv.port}` } });
      const message = typeof rebound.json?.error === 'string' ? rebound.json.error : rebound.json?.error?.message;
      expect([path, rebound.status, message]).toEqual([path, 403, `the Host header "rebound.example:${srv.port}" does not name this server`]);
    }
    // This machine's own names, and a -cors origin's host, still reach it; /healthz is open to probes.
    for (const host of [`localhost:${srv.port}`, `127.0.0.1:${srv.port}`, `app.example:${srv.port}`]) {
      expect([host, (await send(`${srv.url}/v1/contexts`, { headers: { host } })).status]).toEqual([host, 200]);
    }
    expect((await send(`${srv.url}/healthz`, { headers: { host: `rebound.example:${srv.port}` } })).status).toBe(200);
    // MCP follows the same rule on a keyless server, also when the request line names a full URL.
    for (const target of ['/mcp', `http://127.0.0.1:${srv.port}/mcp`]) {
      const mcp = await send(`${srv.url}/mcp`, { method: 'POST', body: {}, headers: { host: `rebound.example:${srv.port}` }, target });
      expect([target, mcp.status, mcp.json.error.message]).toEqual([target, 403, `the Host header "rebound.example:${srv.port}" does not name this server`]);
    }
  });
});

describe('two credentials on one request', () => {
  let srv: RunningServer;
  beforeAll(async () => (srv = await startServer(['-m', model(), '-threads', '1', '-callers', aliceAndBobCallers()])));
  afterAll(() => srv?.stop());

  it('every credential sent must be right and name one caller (a wrong one beside a right one was ignored)', async () => {
    const as = (headers: Record<string, string>) => send(`${srv.url}/v1/models`, { headers });
    expect((await as({ authorization: 'Bearer alice-key', 'x-api-key': 'alice-key' })).status).toBe(200);
    expect((await as({ authorization: 'Bearer not-a-key', 'x-api-key': 'alice-key' })).status).toBe(401);
    expect((await as({ authorization: 'Bearer bob-key', 'x-api-key': 'alice-key' })).status).toBe(401);
    expect((await as({ 'x-api-key': 'alice-key' })).status).toBe(200);
  });
});

describe('enterprise profile', () => {
  const run = (args: string[]) =>
    spawnSync(process.execPath, [join(ROOT, 'bin', 'svc.js'), '-addr', '127.0.0.1:1', '-m', model(), ...args], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });

  it('refuses to start without TLS unless -insecure, and refuses -studio-exec', () => {
    const plain = run(['-profile', 'enterprise']);
    expect(plain.status).toBe(2);
    expect(plain.stderr).toMatch(/-profile enterprise expects TLS/);
    const exec = run(['-profile', 'enterprise', '-insecure', '-studio-exec']);
    expect(exec.status).toBe(2);
    expect(exec.stderr).toMatch(/does not allow -studio-exec/);
  });

  it('-insecure serves plain HTTP and requires markings', async () => {
    const srv = await startServer(['-m', model(), '-threads', '2', '-profile', 'enterprise', '-insecure', '-callers', file('callers.yaml')]);
    try {
      const a = await send(`${srv.url}/v1/models`, { headers: { 'x-api-key': 'alice-key' } });
      expect(a.status).toBe(403);
      expect(a.json.error.message).toBe('the server requires every request to declare its classification');
      expect((await send(`${srv.url}/v1/models`, { headers: { 'x-api-key': 'alice-key', 'x-classification': 'SECRET' } })).status).toBe(200);
    } finally {
      await srv.stop();
    }
  });
});
