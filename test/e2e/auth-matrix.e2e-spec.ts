/**
 * Who may call: API keys, callers files, directory tokens, client certificates
 * and TLS, against the real server process (libs/auth). Certificates come from
 * the openssl CLI, directory tokens from keys generated here and served as a
 * JWKS on 127.0.0.1. Markings, browser origins and the enterprise profile are
 * in auth-guards.
 */
import OpenAI from 'openai';
import { createServer, Server } from 'node:http';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { AuthFiles, expectOpenHealth, expectUnauthorized, ROUTES, send, tlsFetch } from './helpers/auth';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { RunningServer, startServer, TlsClientOptions } from './helpers/server';

jest.setTimeout(180_000);

const model = () => fixtureModel(STORIES);
const files = new AuthFiles();
const { file, pem } = files;

beforeAll(() => files.writeCallers().writeCertificates());

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

  it('a certificate without its key, or a file that is no certificate, stops the server with status 2 naming the flags (it was 1 and OpenSSL\'s words)', async () => {
    await expect(startServer(['-m', model(), '-tls-cert', file('server.pem')])).rejects.toThrow(/^server exited with 2:[\s\S]*svc: flags -tls-cert .*server\.pem \(and no -tls-key: the key is looked for in the same file\): not a PEM certificate and its private key/);
    await expect(startServer(['-m', model(), '-tls-cert', '/etc/hosts', '-tls-key', file('server.key')])).rejects.toThrow(/^server exited with 2:[\s\S]*svc: flags -tls-cert \/etc\/hosts and -tls-key .*: not a PEM certificate/);
    // It booted, then failed every handshake.
    await expect(startServer(['-m', model(), '-tls-cert', file('server.pem'), '-tls-key', file('server.key'), '-tls-client-ca', '/etc/hosts'])).rejects.toThrow(/^server exited with 2:[\s\S]*svc: flag -tls-client-ca: holds no PEM certificate/);
  });
});
