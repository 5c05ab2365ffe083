import { isIP } from 'node:net';
/**
 * Browser-origin rules (pure). A "view" of the request keeps them testable
 * without a server.
 */
export interface RequestView {
  method: string;
  /** Path without the query string. */
  path: string;
  headers: Record<string, string | string[] | undefined>;
  scheme: 'http' | 'https';
  /** The address and port the connection arrived on (the serving address). */
  localAddress?: string;
  localPort?: number;
  /** The peer's address. */
  remoteAddress?: string;
  /** The -addr host, when it names one address (not 0.0.0.0 / ::). */
  listenHost?: string;
}

export type OriginRefusal = { status: 403 | 421; message: string };

const MUTATING = new Set(['POST', 'PUT', 'DELETE', 'PATCH']);
const STORE_ROUTES = new Set(['/api/pull', '/api/copy', '/api/delete']);

export function header(v: Pick<RequestView, 'headers'>, name: string): string | undefined {
  const h = v.headers[name];
  return Array.isArray(h) ? h[0] : h;
}

/** `scheme://host[:port]`, lower-cased with the default port dropped; null when not an origin. */
export function normalizeOrigin(origin: string): string | null {
  if (origin === '*') return '*';
  try {
    const u = new URL(origin);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
    if (u.pathname !== '/' || u.search || u.hash || u.username) return null;
    return `${u.protocol}//${u.host}`.toLowerCase();
  } catch {
    return null;
  }
}

/** Parses -cors values; throws on a value that is not an origin. */
export function parseCorsOrigins(list: string[]): string[] {
  return list.map((o) => {
    const n = normalizeOrigin(o.replace(/\/$/, ''));
    if (!n) throw new Error(`-cors wants an origin such as https://app.example:8443, got "${o}"`);
    return n;
  });
}

/** True when -cors names this origin (or is "*"). */
export function originPermitted(origin: string, permitted: string[]): boolean {
  if (permitted.includes('*')) return origin !== 'null';
  const n = normalizeOrigin(origin);
  return n !== null && n !== '*' && permitted.includes(n);
}

function bare(host: string): string {
  let h = host.toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.startsWith('::ffff:')) h = h.slice(7);
  return h.replace(/\.$/, '');
}

/** localhost, *.localhost, 127.0.0.0/8 or ::1. */
export function isLoopbackName(host: string): boolean {
  const h = bare(host);
  return h === 'localhost' || h.endsWith('.localhost') || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || h === '::1';
}

export function isLoopbackAddress(addr: string | undefined): boolean {
  if (!addr) return false;
  const h = bare(addr);
  return /^127\./.test(h) || h === '::1';
}

/** Host names that address this server: loopback names, the arrival address and the -addr host. */
export function namesServer(host: string, v: RequestView): boolean {
  if (isLoopbackName(host)) return true;
  const h = bare(host);
  if (v.localAddress && h === bare(v.localAddress)) return true;
  return !!v.listenHost && !['0.0.0.0', '::', ''].includes(v.listenHost) && h === bare(v.listenHost);
}

/** Splits a Host header into name and port (port undefined when absent). */
export function parseHost(hostHeader: string): { name: string; port?: number } | null {
  try {
    const u = new URL(`http://${hostHeader}`);
    if (u.pathname !== '/' || u.username) return null;
    return { name: bare(u.hostname), port: u.port ? Number(u.port) : undefined };
  } catch {
    return null;
  }
}

/**
 * The server's own origin: same scheme and port as the connection, and a host
 * that names this server. An attacker's DNS name rebound to 127.0.0.1 is not
 * the server's own origin even though it reaches the same socket.
 */
export function isServerOrigin(origin: string, v: RequestView): boolean {
  try {
    const u = new URL(origin);
    if (u.protocol !== `${v.scheme}:`) return false;
    const port = u.port ? Number(u.port) : v.scheme === 'https' ? 443 : 80;
    if (v.localPort !== undefined && port !== v.localPort) return false;
    return namesServer(u.hostname, v);
  } catch {
    return false;
  }
}

/** A CORS preflight: OPTIONS with Origin and Access-Control-Request-Method. */
export function isPreflight(v: RequestView): boolean {
  return v.method === 'OPTIONS' && !!header(v, 'origin') && !!header(v, 'access-control-request-method');
}

/**
 * Rule 6: POST/PUT/DELETE from a web page whose origin is neither in -cors nor
 * the server's own answers 403 (the store routes with their own message).
 */
export function mutationRefusal(v: RequestView, permitted: string[]): OriginRefusal | null {
  const origin = header(v, 'origin');
  if (!origin || !MUTATING.has(v.method)) return null;
  if (originPermitted(origin, permitted) || isServerOrigin(origin, v)) return null;
  if (STORE_ROUTES.has(v.path)) return { status: 403, message: `a web page at ${origin} may not change this server's model store` };
  return { status: 403, message: `origin not permitted; a web page at ${origin} may not call this server` };
}

export type LocalSurface = 'studio' | 'mcp';

/** Which local-only surface a path belongs to, if any. */
export function localSurface(path: string): LocalSurface | null {
  if (path === '/studio' || path.startsWith('/studio/')) return 'studio';
  if (path === '/mcp' || path.startsWith('/mcp/')) return 'mcp';
  return null;
}

/**
 * DNS-rebinding defence for studio and MCP. Studio: the peer must be this
 * machine and Host a loopback name (else 421). Both: an Origin, when sent,
 * must be the server's own (else 403) — -cors does not open these surfaces.
 * MCP's Host is held to the rule of every other route (keylessHostRefusal):
 * a rebound page holds no key, and a keyed client may name the server as it
 * is reached (this machine's name, a compose or cluster service, a proxy).
 */
export function localSurfaceRefusal(v: RequestView, surface: LocalSurface): OriginRefusal | null {
  if (surface === 'studio') {
    const host = parseHost(header(v, 'host') ?? '');
    if (!isLoopbackAddress(v.remoteAddress) || !host || !isLoopbackName(host.name)) {
      return { status: 421, message: 'Studio answers this machine only' };
    }
  }
  const origin = header(v, 'origin');
  if (origin !== undefined && !isServerOrigin(origin, v)) {
    return { status: 403, message: `origin not permitted; a web page at ${origin} may not call this server` };
  }
  return null;
}

/**
 * DNS-rebinding defence for a server with no credentials (the default): a request that arrived
 * over loopback with a Host naming some registrable domain refuses it, unless that name is this
 * server's (the -addr host, this machine's name) or a -cors origin's host. A rebound name
 * reaches the same socket, and a page's same-origin GETs carry no Origin: they read contexts
 * and exports. An attacker's page needs a public DNS name, so IP literals, single-label names
 * (a compose service, "x") and local-only suffixes (.localhost, .local, .internal) pass, as in
 * the local runner's own check. Requests from other machines (a container's mapped port, a
 * cluster service name) and keyed servers are not affected.
 */
export function keylessHostRefusal(v: RequestView, permitted: string[], machine: string): OriginRefusal | null {
  const hostHeader = header(v, 'host');
  if (hostHeader === undefined || !isLoopbackAddress(v.localAddress)) return null;
  const host = parseHost(hostHeader);
  if (host && (!publicName(host.name) || namesServer(host.name, v) || namesMachine(host.name, machine) || permitted.some((o) => o !== '*' && hostOf(o) === host.name))) return null;
  return { status: 403, message: `the Host header "${hostHeader}" does not name this server` };
}

/** A name an attacker could own in public DNS: dotted, not an IP, not a local-only suffix. */
function publicName(host: string): boolean {
  if (isIP(host) || !host.includes('.')) return false;
  return !/\.(localhost|local|internal|localdomain|home\.arpa)$/.test(host);
}

/** This machine's name, bare or with a .local / .localdomain suffix. */
function namesMachine(host: string, machine: string): boolean {
  const m = machine.toLowerCase();
  return !!m && (host === m || host === `${m}.local` || host === `${m}.localdomain`);
}

function hostOf(origin: string): string | undefined {
  try {
    return bare(new URL(origin).hostname);
  } catch {
    return undefined;
  }
}

/** Headers a permitted origin's preflight answers with. */
export function preflightHeaders(v: RequestView): Record<string, string> {
  const origin = header(v, 'origin') as string;
  const requested = header(v, 'access-control-request-headers');
  return {
    'access-control-allow-origin': origin,
    'access-control-allow-methods': 'GET, POST, PUT, DELETE, OPTIONS',
    'access-control-allow-headers': requested ?? 'Authorization, Content-Type, X-Api-Key, X-Classification',
    'access-control-max-age': '600',
    vary: 'Origin',
  };
}

/** Headers on an actual response to a permitted cross-origin request. */
export const EXPOSED_HEADERS = 'X-Classification, X-Svc-Media, X-Svc-Transcribe-Ms, X-Svc-Evaluated-Tokens, Retry-After, WWW-Authenticate';
