/**
 * The auth layer in-process: the real AuthModule (global guards, interceptor,
 * request hook) on a Fastify Nest app with stand-in routes, over real HTTP on
 * 127.0.0.1. The e2e matrix (test/e2e/auth-matrix) repeats the important
 * cases against the real server process.
 */
import 'reflect-metadata';
import { Body, Controller, Get, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { createServer, request as httpRequest, Server } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { AuthModule } from '../../libs/auth/src/auth.module';
import { Caller } from '../../libs/auth/src/caller';
import { CurrentCaller, CurrentMarking } from '../../libs/auth/src/decorators';
import { Marking } from '../../libs/auth/src/marking';
import { HttpErrorFilter } from '../../libs/http/src/error.filter';
import { installBodyParsing } from '../../libs/http/src/body-parsing';
import { buildConfig, SERVER_CONFIG } from '../../apps/server/src/config/server-config';
import { parseFlags } from '../../apps/server/src/config/flags';

@Controller()
class StandIn {
  @Get('healthz') health() {
    return { status: 'ok' };
  }
  @Get('v1/models') models() {
    return { object: 'list', data: [] };
  }
  @Post('v1/chat/completions') chat(@Body() _b: unknown) {
    return { object: 'chat.completion' };
  }
  @Get('api/version') version() {
    return { version: '0.3.0' };
  }
  @Post('api/pull') pull() {
    return { status: 'success' };
  }
  @Get('whoami') who(@CurrentCaller() c: Caller, @CurrentMarking() m: Marking | null) {
    return { caller: c, marking: m?.canonical ?? null };
  }
}

async function boot(args: string[]): Promise<{ url: string; close: () => Promise<void> }> {
  const config = buildConfig(parseFlags(['-addr', '127.0.0.1:0', ...args]).flags);
  @Module({ imports: [AuthModule], controllers: [StandIn] })
  class Feature {}
  @Module({})
  class Root {}
  const app = await NestFactory.create<NestFastifyApplication>(
    { module: Root, global: true, imports: [Feature], providers: [{ provide: SERVER_CONFIG, useValue: config }], exports: [SERVER_CONFIG] },
    new FastifyAdapter(),
    { logger: false, bodyParser: false },
  );
  installBodyParsing(app.getHttpAdapter().getInstance(), 1 << 20);
  app.useGlobalFilters(new HttpErrorFilter());
  await app.listen(0, '127.0.0.1');
  const port = (app.getHttpServer().address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
}

async function call(url: string, init: RequestInit & { headers?: Record<string, string> } = {}) {
  const r = await fetch(url, init);
  const text = await r.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, headers: r.headers, text, json };
}

/** GET with a chosen Host header (fetch may not set it). */
function rawGet(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const UNAUTH = 'this server requires an API key: send Authorization: Bearer <API_KEY>';

describe('auth layer: no credential sources', () => {
  let s: Awaited<ReturnType<typeof boot>>;
  beforeAll(async () => (s = await boot([])));
  afterAll(() => s.close());

  it('accepts anything, any key string', async () => {
    expect((await call(`${s.url}/v1/models`)).status).toBe(200);
    expect((await call(`${s.url}/v1/models`, { headers: { authorization: 'Bearer whatever' } })).status).toBe(200);
    const who = await call(`${s.url}/whoami`, { headers: { 'x-api-key': 'x' } });
    expect(who.json).toEqual({ caller: { name: 'anonymous', compartments: [], labels: [], anonymous: true, via: 'none' }, marking: null });
  });

  it('unknown routes stay 404 in the spec shape', async () => {
    const r = await call(`${s.url}/v1/nothing`);
    expect(r.status).toBe(404);
    expect(r.json.error.type).toBe('Not Found');
  });
});

describe('auth layer: keys and callers', () => {
  let s: Awaited<ReturnType<typeof boot>>;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-auth-'));
    const file = join(dir, 'callers.yaml');
    writeFileSync(file, 'callers:\n  - name: alice\n    keys: ["alice-key"]\n    clearance: SECRET\n    compartments: [HCS]\n    labels: [blue]\n');
    s = await boot(['-api-key', 'k1', '-callers', file]);
  });
  afterAll(() => s.close());

  it.each([
    ['missing', {}],
    ['wrong bearer', { authorization: 'Bearer nope' }],
    ['wrong x-api-key', { 'x-api-key': 'nope' }],
    ['other scheme', { authorization: 'Basic azE6' }],
  ])('401 when %s, both dialect shapes, WWW-Authenticate', async (_l, headers) => {
    const v1 = await call(`${s.url}/v1/models`, { headers });
    expect(v1.status).toBe(401);
    expect(v1.headers.get('www-authenticate')).toBe('Bearer realm=svc');
    expect(v1.json).toEqual({ error: { message: UNAUTH, type: 'Unauthorized' } });
    const api = await call(`${s.url}/api/version`, { headers });
    expect(api.status).toBe(401);
    expect(api.json).toEqual({ error: UNAUTH });
  });

  it('answers with either spelling, names the callers', async () => {
    expect((await call(`${s.url}/v1/models`, { headers: { authorization: 'Bearer k1' } })).status).toBe(200);
    expect((await call(`${s.url}/api/version`, { headers: { 'x-api-key': 'k1' } })).status).toBe(200);
    const who = await call(`${s.url}/whoami`, { headers: { authorization: 'bearer alice-key' } });
    expect(who.json.caller).toEqual({ name: 'alice', clearance: 'SECRET', compartments: ['HCS'], labels: ['blue'], anonymous: false, via: 'callers-file' });
    const key = await call(`${s.url}/whoami`, { headers: { 'x-api-key': 'k1' } });
    expect(key.json.caller).toMatchObject({ name: 'api-key', anonymous: true });
  });

  it('healthz stays open; unknown routes need a key before they say 404', async () => {
    expect((await call(`${s.url}/healthz`)).status).toBe(200);
    const r = await call(`${s.url}/v1/nothing`);
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe('Bearer realm=svc');
    expect((await call(`${s.url}/v1/nothing`, { headers: { 'x-api-key': 'k1' } })).status).toBe(404);
  });

  it('401 before the body is looked at', async () => {
    const r = await call(`${s.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' });
    expect(r.status).toBe(401);
  });
});

describe('auth layer: markings', () => {
  let s: Awaited<ReturnType<typeof boot>>;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-auth-'));
    const file = join(dir, 'callers.json');
    writeFileSync(
      file,
      JSON.stringify([
        { name: 'alice', keys: ['alice-key'], clearance: 'SECRET', compartments: ['HCS'] },
        { name: 'carol', keys: ['carol-key'] },
      ]),
    );
    s = await boot(['-callers', file, '-classification']);
  });
  afterAll(() => s.close());
  const as = (key: string, marking?: string) => ({ headers: { 'x-api-key': key, ...(marking !== undefined ? { 'x-classification': marking } : {}) } });

  it('admits a cleared request, echoes the header, exposes the marking', async () => {
    const r = await call(`${s.url}/whoami`, as('alice-key', 'secret//hcs'));
    expect(r.status).toBe(200);
    expect(r.headers.get('x-classification')).toBe('secret//hcs');
    expect(r.json.marking).toBe('SECRET//HCS');
  });

  it.each([
    ['alice-key', undefined, 403, 'the server requires every request to declare its classification'],
    ['alice-key', 'TOP SECRET', 403, 'alice is cleared to SECRET and this request is TOP SECRET'],
    ['alice-key', 'SECRET//HCS/SI', 403, 'alice is not read into SI'],
    ['carol-key', 'UNCLASSIFIED', 403, 'carol holds no clearance on this server'],
    ['alice-key', 'SECRET//', 400, 'malformed X-Classification "SECRET//": empty compartment name'],
    ['alice-key', 'COSMIC', 400, 'malformed X-Classification "COSMIC": unknown level "COSMIC"; levels are UNCLASSIFIED, CONFIDENTIAL, SECRET, TOP SECRET'],
  ])('%s %j → %d', async (key, marking, status, message) => {
    const v1 = await call(`${s.url}/v1/models`, as(key, marking));
    expect(v1.status).toBe(status);
    expect(v1.json.error.message).toBe(message);
    if (marking) expect(v1.headers.get('x-classification')).toBe(marking);
    const api = await call(`${s.url}/api/version`, as(key, marking));
    expect(api.json).toEqual({ error: message });
  });

  it('echoes on 401 and 404 too; healthz needs no marking', async () => {
    const r = await call(`${s.url}/v1/models`, { headers: { 'x-classification': 'SECRET' } });
    expect(r.status).toBe(401);
    expect(r.headers.get('x-classification')).toBe('SECRET');
    const nf = await call(`${s.url}/v1/nothing`, as('alice-key', 'SECRET'));
    expect(nf.status).toBe(404);
    expect(nf.headers.get('x-classification')).toBe('SECRET');
    expect((await call(`${s.url}/healthz`)).status).toBe(200);
  });
});

describe('auth layer: browser origins', () => {
  let s: Awaited<ReturnType<typeof boot>>;
  beforeAll(async () => (s = await boot(['-cors', 'https://app.example'])));
  afterAll(() => s.close());
  const pre = (origin: string, path = '/v1/chat/completions') =>
    call(`${s.url}${path}`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' } });

  it('preflight: CORS headers only for a permitted origin, never a body', async () => {
    const ok = await pre('https://app.example');
    expect(ok.status).toBe(204);
    expect(ok.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(ok.headers.get('access-control-allow-headers')).toBe('authorization,content-type');
    expect(ok.text).toBe('');
    const no = await pre('https://evil.example');
    expect(no.status).toBe(204);
    expect(no.text).toBe('');
    expect([...no.headers.keys()].filter((k) => k.startsWith('access-control'))).toEqual([]);
    const mcp = await pre('https://app.example', '/mcp');
    expect(mcp.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('mutations from another origin: 403 in the route shape', async () => {
    const post = (path: string, origin: string) =>
      call(`${s.url}${path}`, { method: 'POST', headers: { origin, 'content-type': 'application/json' }, body: '{}' });
    const chat = await post('/v1/chat/completions', 'https://evil.example');
    expect(chat.status).toBe(403);
    expect(chat.json).toEqual({ error: { message: 'origin not permitted; a web page at https://evil.example may not call this server', type: 'Forbidden' } });
    const pull = await post('/api/pull', 'https://evil.example');
    expect(pull.json).toEqual({ error: "a web page at https://evil.example may not change this server's model store" });
    const ok = await post('/v1/chat/completions', 'https://app.example');
    expect(ok.status).toBe(201);
    expect(ok.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect((await post('/v1/chat/completions', s.url)).status).toBe(201);
    expect((await call(`${s.url}/v1/models`, { headers: { origin: 'https://evil.example' } })).status).toBe(200);
  });

  it('MCP and studio refuse foreign origins (the routes need not exist)', async () => {
    const mcp = await call(`${s.url}/mcp`, { method: 'POST', headers: { origin: 'https://app.example', 'content-type': 'application/json' }, body: '{}' });
    expect(mcp.status).toBe(403);
    expect(mcp.json.error.message).toBe('origin not permitted; a web page at https://app.example may not call this server');
    expect((await call(`${s.url}/mcp`, { method: 'POST', headers: { origin: s.url, 'content-type': 'application/json' }, body: '{}' })).status).toBe(404);
    const studio = await rawGet(`${s.url}/studio`, { host: `rebound.example:${new URL(s.url).port}` });
    expect(studio.status).toBe(421);
    expect(JSON.parse(studio.body).error.message).toBe('Studio answers this machine only');
    expect((await rawGet(`${s.url}/studio`, { host: `localhost:${new URL(s.url).port}` })).status).toBe(404);
    expect((await call(`${s.url}/studio`)).status).toBe(404);
    const mcpHost = await rawGet(`${s.url}/mcp`, { host: 'rebound.example' });
    expect(mcpHost.status).toBe(403);
    expect(JSON.parse(mcpHost.body).error.message).toBe('the Host header "rebound.example" does not name this server');
  });
});

describe('auth layer: the studio page needs no credential under -studio (a browser navigates to it)', () => {
  let studio: Awaited<ReturnType<typeof boot>>;
  let plain: Awaited<ReturnType<typeof boot>>;
  beforeAll(async () => {
    studio = await boot(['-studio', '-api-key', 'k', '-classification']);
    plain = await boot(['-api-key', 'k']);
  });
  afterAll(async () => {
    await studio.close();
    await plain.close();
  });

  it('asks the key for the studio page too, as for every route but /healthz (no stand-in route: 404 with it)', async () => {
    for (const [path, method] of [['/studio', 'GET'], ['/studio', 'HEAD'], ['/studio', 'POST'], ['/studio/config', 'GET'], ['/studio/exec', 'POST'], ['/v1/models', 'GET']]) {
      const r = await call(`${studio.url}${path}`, { method, headers: { 'content-type': 'application/json' }, body: method === 'POST' ? '{}' : undefined });
      expect([path, method, r.status]).toEqual([path, method, 401]);
      if (method !== 'HEAD') expect(r.json?.error?.message).toBe(UNAUTH);
    }
    expect((await call(`${plain.url}/studio`)).status).toBe(401);
  });

  it("keeps the studio's Host and Origin rules on the page", async () => {
    const port = new URL(studio.url).port;
    expect((await rawGet(`${studio.url}/studio`, { host: `rebound.example:${port}` })).status).toBe(421);
    const foreign = await call(`${studio.url}/studio`, { headers: { origin: 'https://evil.example' } });
    expect([foreign.status, foreign.json.error.message]).toEqual([403, 'origin not permitted; a web page at https://evil.example may not call this server']);
  });
});

describe('auth layer: directory sign-in', () => {
  let s: Awaited<ReturnType<typeof boot>>;
  let jwks: Server;
  let issuer: string;
  let sign: (claims: Record<string, unknown>, opts?: { exp?: string | number; iss?: string; aud?: string; other?: boolean }) => Promise<string>;
  beforeAll(async () => {
    const good = await generateKeyPair('ES256');
    const other = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(good.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
    jwks = createServer((req, res) => {
      if (req.url === '/.well-known/jwks.json') {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ keys: [jwk] }));
      } else {
        res.statusCode = 404;
        res.end();
      }
    });
    await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
    issuer = `http://127.0.0.1:${(jwks.address() as { port: number }).port}`;
    sign = (claims, o = {}) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
        .setIssuer(o.iss ?? issuer)
        .setAudience(o.aud ?? 'svc')
        .setIssuedAt()
        .setExpirationTime(o.exp ?? '5m')
        .sign(o.other ? other.privateKey : good.privateKey);
    s = await boot(['-oidc-issuer', issuer, '-oidc-audience', 'svc', '-oidc-name-claim', 'email', '-oidc-clearance-claim', 'clearance', '-oidc-compartments-claim', 'groups', '-classification', '-require-classification=false']);
  });
  afterAll(async () => {
    await s.close();
    jwks.closeAllConnections();
    await new Promise((r) => jwks.close(r));
  });

  it('admits a valid token and names the caller from the claims', async () => {
    const t = await sign({ sub: 'u1', email: 'dana@example.org', clearance: 'confidential', groups: ['hcs'] });
    const r = await call(`${s.url}/whoami`, { headers: { authorization: `Bearer ${t}`, 'x-classification': 'CONFIDENTIAL//HCS' } });
    expect(r.status).toBe(200);
    expect(r.json.caller).toEqual({ name: 'dana@example.org', clearance: 'CONFIDENTIAL', compartments: ['HCS'], labels: [], anonymous: false, via: 'token' });
    const above = await call(`${s.url}/v1/models`, { headers: { authorization: `Bearer ${t}`, 'x-classification': 'SECRET' } });
    expect(above.json.error.message).toBe('dana@example.org is cleared to CONFIDENTIAL and this request is SECRET');
  });

  it.each([
    ['expired', { exp: Math.floor(Date.now() / 1000) - 3600 }],
    ['another issuer', { iss: 'http://issuer.invalid' }],
    ['another audience', { aud: 'other' }],
    ['another key', { other: true }],
  ])('401 for a token from %s', async (_l, o) => {
    const t = await sign({ email: 'dana@example.org' }, o);
    const r = await call(`${s.url}/v1/models`, { headers: { authorization: `Bearer ${t}` } });
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe('Bearer realm=svc');
  });

  it('401 for a token without the name claim, or garbage', async () => {
    expect((await call(`${s.url}/v1/models`, { headers: { authorization: `Bearer ${await sign({ sub: 'x' })}` } })).status).toBe(401);
    expect((await call(`${s.url}/v1/models`, { headers: { authorization: 'Bearer a.b.c' } })).status).toBe(401);
  });
});
