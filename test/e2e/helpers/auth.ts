/**
 * What the auth end-to-end specs share: a raw request helper (any headers, Host
 * included, and an optional client certificate), a fetch over TLS for the openai
 * client, certificates from the openssl CLI, the callers files, and the
 * representative routes with the 401 body the spec gives.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { IncomingHttpHeaders, IncomingMessage, request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { RunningServer, TlsClientOptions } from './server';

export const UNAUTH = 'this server requires an API key: send Authorization: Bearer <API_KEY>';

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  json: any;
}

/** One request over http or https, with any headers (Host included), optional client certificate and request-line target. */
export function send(url: string, o: { method?: string; headers?: Record<string, string>; body?: unknown; tls?: TlsClientOptions; target?: string } = {}): Promise<Answer> {
  const body = o.body === undefined ? undefined : typeof o.body === 'string' ? o.body : JSON.stringify(o.body);
  const headers: Record<string, string> = {
    ...(body !== undefined ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}),
    ...o.headers,
  };
  return new Promise((resolve, reject) => {
    const cb = (res: IncomingMessage) => {
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
      ? httpsRequest(url, { method: o.method ?? 'GET', headers, agent: false, ...(o.target ? { path: o.target } : {}), ...(o.tls ?? {}) }, cb)
      : httpRequest(url, { method: o.method ?? 'GET', headers, agent: false, ...(o.target ? { path: o.target } : {}) }, cb);
    req.on('error', reject);
    req.end(body);
  });
}

/** A fetch for the openai client over https with our CA and client certificate. */
export function tlsFetch(tls: TlsClientOptions): typeof fetch {
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

/** A scratch folder for certificates and callers files. */
export class AuthFiles {
  readonly dir = mkdtempSync(join(tmpdir(), 'svc-auth-e2e-'));
  file = (n: string): string => join(this.dir, n);
  pem = (n: string): Buffer => readFileSync(this.file(n));

  /** alice (key `alice-key`, stored hashed; SECRET, HCS) and carol (key `carol-key`, no clearance). */
  writeCallers(): this {
    const hex = createHash('sha256').update('alice-key').digest('hex');
    const yaml = ['callers:', '  - name: alice', `    keys: ["sha256:${hex}"]`, '    clearance: SECRET', '    compartments: [HCS]', '  - name: carol', '    keys: [carol-key]', ''];
    writeFileSync(this.file('callers.yaml'), yaml.join('\n'));
    // Client-certificate callers: profiles only (no keys), named by the certificate.
    writeFileSync(this.file('cert-callers.json'), JSON.stringify({ callers: [{ name: 'alice-cert', clearance: 'CONFIDENTIAL' }] }));
    return this;
  }

  /** A server certificate for 127.0.0.1/localhost; client certificates alice, bob and a foreign mallory. */
  writeCertificates(): this {
    this.makeCa('server-ca');
    this.makeCa('client-ca');
    this.makeCa('rogue-ca');
    this.makeLeaf('server', 'server-ca', '/CN=localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
    this.makeLeaf('alice', 'client-ca', '/CN=alice-cert/O=svc tests', 'extendedKeyUsage=clientAuth\n');
    this.makeLeaf('bob', 'client-ca', '/O=svc tests', 'subjectAltName=email:bob@example.org,DNS:bob.example\nextendedKeyUsage=clientAuth\n');
    this.makeLeaf('mallory', 'rogue-ca', '/CN=alice-cert', 'extendedKeyUsage=clientAuth\n');
    return this;
  }

  private openssl(...args: string[]): void {
    execFileSync('openssl', args, { cwd: this.dir, stdio: 'pipe' });
  }

  private makeCa(name: string): void {
    this.openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.pem`, '-subj', `/CN=${name}`, '-days', '2');
  }

  private makeLeaf(name: string, ca: string, subject: string, ext: string): void {
    writeFileSync(this.file(`${name}.ext`), ext);
    this.openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject);
    this.openssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-out', `${name}.pem`, '-days', '2', '-extfile', `${name}.ext`);
  }
}

// ---- representative routes -------------------------------------------------

export type Route = { name: string; method: string; path: string; body?: unknown; ok: (a: Answer) => void };
export const ROUTES: Route[] = [
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

export function expectUnauthorized(a: Answer, path: string): void {
  expect(a.status).toBe(401);
  expect(a.headers['www-authenticate']).toBe('Bearer realm=svc');
  expect(a.json).toEqual(path.startsWith('/api/') ? { error: UNAUTH } : { error: { message: UNAUTH, type: 'Unauthorized' } });
}

export async function expectOpenHealth(srv: RunningServer, tls?: TlsClientOptions): Promise<void> {
  const h = await send(`${srv.url}/healthz`, { tls });
  expect(h.status).toBe(200);
  expect(h.json.status).toBe('ok');
}
