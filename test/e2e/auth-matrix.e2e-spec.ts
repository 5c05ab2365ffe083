/**
 * Authentication, markings, browser origins, TLS and mTLS against the real
 * server process (libs/auth). Certificates come from the openssl CLI, directory
 * tokens from keys generated here and served as a JWKS on 127.0.0.1.
 */
import OpenAI from 'openai';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, IncomingHttpHeaders, request as httpRequest, Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { fixtureModel, ROOT, STORIES } from './helpers/fixtures';
import { RunningServer, startServer, TlsClientOptions } from './helpers/server';

jest.setTimeout(180_000);

const UNAUTH = 'this server requires an API key: send Authorization: Bearer <API_KEY>';
const DIR = mkdtempSync(join(tmpdir(), 'svc-auth-e2e-'));
const model = () => fixtureModel(STORIES);

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  json: any;
}

/** One request over http or https, with any headers (Host included) and optional client certificate. */
function send(url: string, o: { method?: string; headers?: Record<string, string>; body?: unknown; tls?: TlsClientOptions } = {}): Promise<Answer> {
  const body = o.body === undefined ? undefined : typeof o.body === 'string' ? o.body : JSON.stringify(o.body);
  const headers: Record<string, string> = {
    ...(body !== undefined ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}),
    ...o.headers,
  };
  return new Promise((resolve, reject) => {
    const cb = (res: import('node:http').IncomingMessage) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
    };
    const req = url.startsWith('https:')
      ? httpsRequest(url, { method: o.method ?? 'GET', headers, agent: false, ...(o.tls ?? {}) }, cb)
      : httpRequest(url, { method: o.method ?? 'GET', headers, agent: false }, cb);
    req.on('error', reject);
    req.end(body);
  });
}

/** A fetch for the openai client over https with our CA and client certificate. */
function tlsFetch(tls: TlsClientOptions): typeof fetch {
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    return new Promise<Response>((resolve, reject) => {
      const req = httpsRequest(url, { method: init.method ?? 'GET', headers, agent: false, ...tls }, (res) => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
        const nobody = res.statusCode === 204 || res.statusCode === 304;
        resolve(new Response(nobody ? null : (Readable.toWeb(res) as ReadableStream), { status: res.statusCode, headers: h }));
      });
      req.on('error', reject);
      req.end(typeof init.body === 'string' ? init.body : undefined);
    });
  }) as typeof fetch;
}

// ---- certificates ---------------------------------------------------------

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: DIR, stdio: 'pipe' });
}

function makeCa(name: string): void {
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.pem`, '-subj', `/CN=${name}`, '-days', '2');
}

function makeLeaf(name: string, ca: string, subject: string, ext: string): void {
  writeFileSync(join(DIR, `${name}.ext`), ext);
  openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject);
  openssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-out', `${name}.pem`, '-days', '2', '-extfile', `${name}.ext`);
}

const file = (n: string) => join(DIR, n);
const pem = (n: string) => readFileSync(file(n));

beforeAll(() => {
  makeCa('server-ca');
  makeCa('client-ca');
  makeCa('rogue-ca');
  makeLeaf('server', 'server-ca', '/CN=localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  makeLeaf('alice', 'client-ca', '/CN=alice-cert/O=svc tests', 'extendedKeyUsage=clientAuth\n');
  makeLeaf('bob', 'client-ca', '/O=svc tests', 'subjectAltName=email:bob@example.org,DNS:bob.example\nextendedKeyUsage=clientAuth\n');
  makeLeaf('mallory', 'rogue-ca', '/CN=alice-cert', 'extendedKeyUsage=clientAuth\n');
  const hex = createHash('sha256').update('alice-key').digest('hex');
  writeFileSync(
    file('callers.yaml'),
    [
      'callers:',
      '  - name: alice',
      `    keys: ["sha256:${hex}"]`,
      '    clearance: SECRET',
      '    compartments: [HCS]',
      '  - name: carol',
      '    keys: [carol-key]',
      '',
    ].join('\n'),
  );
  // Client-certificate callers: profiles only (no keys), named by the certificate.
  writeFileSync(file('cert-callers.json'), JSON.stringify({ callers: [{ name: 'alice-cert', clearance: 'CONFIDENTIAL' }] }));
});

// ---- representative routes -------------------------------------------------

type Route = { name: string; method: string; path: string; body?: unknown; ok: (a: Answer) => void };
const ROUTES: Route[] = [
  { name: 'GET /v1/models', method: 'GET', path: '/v1/models', ok: (a) => expect(a.json.object).toBe('list') },
  {
    name: 'POST /v1/chat/completions',
    method: 'POST',
    path: '/v1/chat/completions',
    body: { model: '', messages: [{ role: 'user', content: 'Once' }], max_tokens: 1 },
    ok: (a) => expect(a.json.object).toBe('chat.completion'),
  },
  {
    name: 'POST /v1/responses',
    method: 'POST',
    path: '/v1/responses',
    body: { model: '', input: 'Once', max_output_tokens: 1 },
    ok: (a) => expect(a.json.object).toBe('response'),
  },
  { name: 'GET /metrics', method: 'GET', path: '/metrics', ok: (a) => expect(a.text.length).toBeGreaterThan(0) },
  { name: 'GET /api/version', method: 'GET', path: '/api/version', ok: (a) => expect(a.json).toEqual({ version: '0.3.0' }) },
];

function expectUnauthorized(a: Answer, path: string): void {
  expect(a.status).toBe(401);
  expect(a.headers['www-authenticate']).toBe('Bearer realm=svc');
  expect(a.json).toEqual(path.startsWith('/api/') ? { error: UNAUTH } : { error: { message: UNAUTH, type: 'Unauthorized' } });
}

async function expectOpenHealth(srv: RunningServer, tls?: TlsClientOptions): Promise<void> {
  const h = await send(`${srv.url}/healthz`, { tls });
  expect(h.status).toBe(200);
  expect(h.json.status).toBe('ok');
}

// ---- the matrix --------------------------------------------------------------

describe('credential matrix', () => {
  let jwks: Server;
  let issuer: string;
  let sign: (claims: Record<string, unknown>, other?: boolean) => Promise<string>;

  beforeAll(async () => {
    const good = await generateKeyPair('ES256');
    const other = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(good.publicKey)), kid: 'test-key', alg: 'ES256', use: 'sig' };
    jwks = createServer((req, res) => {
      if (req.url === '/keys') {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ keys: [jwk] }));
      } else if (req.url === '/.well-known/openid-configuration') {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/keys` }));
      } else {
        res.statusCode = 404;
        res.end();
      }
    });
    await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
    issuer = `http://127.0.0.1:${(jwks.address() as { port: number }).port}`;
    sign = (claims, useOther = false) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'ES256', kid: 'test-key' })
        .setIssuer(issuer)
        .setAudience('svc')
        .setIssuedAt()
        .setExpirationTime('10m')
        .sign(useOther ? other.privateKey : good.privateKey);
  });
  afterAll(async () => {
    jwks.closeAllConnections();
    await new Promise((r) => jwks.close(r));
  });

  type Mode = {
    name: string;
    args: () => string[];
    wrong: () => Promise<Record<string, string>>;
    right: () => Promise<Record<string, string>[]>;
  };
  const MODES: Mode[] = [
    { name: 'API key', args: () => ['-api-key', 'k1', '-api-key', 'k2'], wrong: async () => ({ authorization: 'Bearer k3' }), right: async () => [{ authorization: 'Bearer k1' }, { 'x-api-key': 'k2' }] as Record<string, string>[] },
    { name: 'callers file', args: () => ['-callers', file('callers.yaml')], wrong: async () => ({ 'x-api-key': 'alice-key-' }), right: async () => [{ authorization: 'Bearer alice-key' }, { 'x-api-key': 'carol-key' }] as Record<string, string>[] },
    {
      name: 'directory token',
      // No -oidc-jwks: the key set is found through the issuer's discovery document.
      args: () => ['-oidc-issuer', issuer, '-oidc-audience', 'svc'],
      wrong: async () => ({ authorization: `Bearer ${await sign({ sub: 'dana' }, true)}` }),
      right: async () => [{ authorization: `Bearer ${await sign({ sub: 'dana' })}` }],
    },
  ];

  describe('no credential source', () => {
    let srv: RunningServer;
    beforeAll(async () => (srv = await startServer(['-m', model(), '-threads', '2'])));
    afterAll(() => srv?.stop());

    it.each(ROUTES)('$name answers without a key, with any key', async (route) => {
      for (const headers of [{}, { authorization: 'Bearer any-string-at-all' }, { 'x-api-key': 'whatever' }] as Record<string, string>[]) {
        const a = await send(`${srv.url}${route.path}`, { method: route.method, body: route.body, headers });
        expect(a.status).toBe(200);
        route.ok(a);
      }
      await expectOpenHealth(srv);
    });

    it('the openai client works with any key string', async () => {
      const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'anything' });
      const c = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Once' }], max_tokens: 1 });
      expect(c.object).toBe('chat.completion');
    });
  });

  describe.each(MODES)('$name', (mode) => {
    let srv: RunningServer;
    beforeAll(async () => (srv = await startServer(['-m', model(), '-threads', '2', ...mode.args()])));
    afterAll(() => srv?.stop());

    it.each(ROUTES)('$name: missing → 401, wrong → 401, right → 200', async (route) => {
      const missing = await send(`${srv.url}${route.path}`, { method: route.method, body: route.body });
      expectUnauthorized(missing, route.path);
      const wrong = await send(`${srv.url}${route.path}`, { method: route.method, body: route.body, headers: await mode.wrong() });
      expectUnauthorized(wrong, route.path);
      for (const headers of await mode.right()) {
        const right = await send(`${srv.url}${route.path}`, { method: route.method, body: route.body, headers });
        expect(right.status).toBe(200);
        expect(right.headers['www-authenticate']).toBeUndefined();
        route.ok(right);
      }
    });

    it('GET /healthz is always open; unknown routes answer 401 until a credential is shown', async () => {
      await expectOpenHealth(srv);
      expectUnauthorized(await send(`${srv.url}/v1/no-such-route`), '/v1/no-such-route');
      const [right] = await mode.right();
      const nf = await send(`${srv.url}/v1/no-such-route`, { headers: right });
      expect(nf.status).toBe(404);
      expect(nf.json.error.type).toBe('Not Found');
    });

    it('the openai client: 401 without the credential, answers with it', async () => {
      const [right] = await mode.right();
      const key = (right.authorization ?? '').replace(/^Bearer /, '') || right['x-api-key'];
      const bad = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'not-the-key', maxRetries: 0 });
      await expect(bad.models.list()).rejects.toMatchObject({ status: 401 });
      const good = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: key });
      const c = await good.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Once' }], max_tokens: 1 });
      expect(c.choices[0].message.role).toBe('assistant');
    });
  });

  describe('directory token claims', () => {
    let srv: RunningServer;
    beforeAll(
      async () =>
        (srv = await startServer([
          '-m', model(), '-threads', '2',
          '-oidc-issuer', issuer, '-oidc-audience', 'svc', '-oidc-jwks', `${issuer}/keys`,
          '-oidc-name-claim', 'email', '-oidc-clearance-claim', 'clearance', '-oidc-compartments-claim', 'groups',
          '-classification', '-require-classification=false',
        ])),
    );
    afterAll(() => srv?.stop());

    it('names the caller, its clearance and compartments from the claims', async () => {
      const t = await sign({ sub: 'u1', email: 'dana@example.org', clearance: 'CONFIDENTIAL', groups: 'hcs si' });
      const auth = { authorization: `Bearer ${t}` };
      expect((await send(`${srv.url}/v1/models`, { headers: { ...auth, 'x-classification': 'CONFIDENTIAL//HCS/SI' } })).status).toBe(200);
      const above = await send(`${srv.url}/v1/models`, { headers: { ...auth, 'x-classification': 'SECRET' } });
      expect(above.json.error.message).toBe('dana@example.org is cleared to CONFIDENTIAL and this request is SECRET');
      const comp = await send(`${srv.url}/v1/models`, { headers: { ...auth, 'x-classification': 'CONFIDENTIAL//TK' } });
      expect(comp.json.error.message).toBe('dana@example.org is not read into TK');
      const noName = await send(`${srv.url}/v1/models`, { headers: { authorization: `Bearer ${await sign({ sub: 'u2' })}` } });
      expectUnauthorized(noName, '/v1/models');
    });
  });

  describe('client certificate (mTLS)', () => {
    let srv: RunningServer;
    const ca = () => pem('server-ca.pem');
    const alice = (): TlsClientOptions => ({ ca: ca(), cert: pem('alice.pem'), key: pem('alice.key') });
    const bob = (): TlsClientOptions => ({ ca: ca(), cert: pem('bob.pem'), key: pem('bob.key') });
    const mallory = (): TlsClientOptions => ({ ca: ca(), cert: pem('mallory.pem'), key: pem('mallory.key') });
    beforeAll(
      async () =>
        (srv = await startServer(
          ['-m', model(), '-threads', '2', '-tls-cert', file('server.pem'), '-tls-key', file('server.key'), '-tls-client-ca', file('client-ca.pem'),
            '-callers', file('cert-callers.json'), '-classification', '-require-classification=false'],
          { tls: alice() },
        )),
    );
    afterAll(() => srv?.stop());

    it.each(ROUTES)('$name: no certificate or a foreign one fails the handshake; ours answers', async (route) => {
      expect(srv.url.startsWith('https://')).toBe(true);
      await expect(send(`${srv.url}${route.path}`, { method: route.method, body: route.body, tls: { ca: ca() } })).rejects.toThrow();
      await expect(send(`${srv.url}${route.path}`, { method: route.method, body: route.body, tls: mallory() })).rejects.toThrow();
      const right = await send(`${srv.url}${route.path}`, { method: route.method, body: route.body, tls: alice() });
      expect(right.status).toBe(200);
      route.ok(right);
    });

    it('healthz answers any certified client; the certificate names the caller (CN, else SAN)', async () => {
      await expectOpenHealth(srv, bob());
      const a = await send(`${srv.url}/v1/models`, { tls: alice(), headers: { 'x-classification': 'SECRET' } });
      expect(a.status).toBe(403);
      expect(a.json.error.message).toBe('alice-cert is cleared to CONFIDENTIAL and this request is SECRET');
      const b = await send(`${srv.url}/api/version`, { tls: bob(), headers: { 'x-classification': 'UNCLASSIFIED' } });
      expect(b.json).toEqual({ error: 'bob@example.org holds no clearance on this server' });
    });

    it('with no keys on the server, a placeholder key beside the certificate is ignored', async () => {
      const a = await send(`${srv.url}/v1/models`, { tls: alice(), headers: { authorization: 'Bearer sk-anything', 'x-classification': 'SECRET' } });
      expect(a.json.error.message).toBe('alice-cert is cleared to CONFIDENTIAL and this request is SECRET');
    });

    it('the openai client over mTLS', async () => {
      const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', fetch: tlsFetch(alice()), maxRetries: 0 });
      const c = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Once' }], max_tokens: 1 });
      expect(c.object).toBe('chat.completion');
      const nocert = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', fetch: tlsFetch({ ca: ca() }), maxRetries: 0 });
      await expect(nocert.models.list()).rejects.toThrow();
    });
  });
});

describe('TLS with an API key', () => {
  let srv: RunningServer;
  beforeAll(async () => (srv = await startServer(['-m', model(), '-threads', '2', '-tls-cert', file('server.pem'), '-tls-key', file('server.key'), '-api-key', 'k1'], { tls: { ca: pem('server-ca.pem') } })));
  afterAll(() => srv?.stop());

  it('serves HTTPS on the port; the openai client answers with the key', async () => {
    const tls = { ca: pem('server-ca.pem') };
    expectUnauthorized(await send(`${srv.url}/v1/models`, { tls }), '/v1/models');
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'k1', fetch: tlsFetch(tls), maxRetries: 0 });
    const c = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Once' }], max_tokens: 1 });
    expect(c.object).toBe('chat.completion');
    await expect(send(srv.url.replace('https:', 'http:') + '/healthz')).rejects.toThrow();
  });
});

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
    for (const [method, path] of [['POST', '/api/pull'], ['POST', '/api/copy'], ['DELETE', '/api/delete']]) {
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

  it('studio and MCP: Host and Origin must name this machine', async () => {
    const auth = { authorization: 'Bearer k1' };
    const mcpHost = await send(`${srv.url}/mcp`, { method: 'POST', body: {}, headers: { ...auth, host: `rebound.example:${srv.port}` } });
    expect(mcpHost.status).toBe(403);
    expect(mcpHost.json.error.message).toBe(`the Host header "rebound.example:${srv.port}" does not name this server`);
    const mcpOrigin = await send(`${srv.url}/mcp`, { method: 'POST', body: {}, headers: { ...auth, origin: 'https://app.example' } });
    expect(mcpOrigin.status).toBe(403);
    expect(mcpOrigin.json.error.message).toBe('origin not permitted; a web page at https://app.example may not call this server');
    const studio = await send(`${srv.url}/studio`, { headers: { ...auth, host: `rebound.example:${srv.port}` } });
    expect(studio.status).toBe(421);
    expect(studio.json).toEqual({ error: { message: 'Studio answers this machine only', type: 'Misdirected Request' } });
    // Addressed as localhost the check passes (the routes themselves come with their modules).
    expect([200, 404]).toContain((await send(`${srv.url}/studio`, { headers: { ...auth, host: `localhost:${srv.port}` } })).status);
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
