import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ClientRequestArgs, IncomingMessage, request } from 'node:http';
import { isIP, Socket } from 'node:net';
import { checkServerIdentity, connect as tlsConnect, PeerCertificate } from 'node:tls';

/** How `svc pull` reaches a running server at -addr. */
export interface ServerLink {
  host: string;
  port: number;
  /** Sent as `Authorization: Bearer` (a bare -api-key, a callers-file key or a directory token). */
  apiKey?: string;
  /**
   * A PEM file: set, the server is spoken to over HTTPS and trusted when it presents a
   * certificate of this file (the server's own -tls-cert: pinned, so the name in -addr need not
   * match it, as with 0.0.0.0 inside a container) or one this file's CA signed for that name.
   */
  tlsCert?: string;
}

/** Nothing listens at -addr: the one failure after which `svc pull` pulls into the local store. */
export class NoServerError extends Error {}

/**
 * POSTs JSON to the server and resolves with its answer, whatever the status. Any failure to
 * talk to it other than a refused connection is an error: pulling locally then would put the
 * model in a store the running server never reads.
 */
export function postToServer(link: ServerLink, path: string, body: unknown): Promise<IncomingMessage> {
  const data = JSON.stringify(body);
  const headers: Record<string, string> = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(data)) };
  if (link.apiKey) headers.authorization = `Bearer ${link.apiKey}`;
  const trust = link.tlsCert ? readTrust(link.tlsCert) : undefined;
  const where = `${link.host.includes(':') ? `[${link.host}]` : link.host}:${link.port}`;
  const args: ClientRequestArgs = { host: link.host, port: link.port, path, method: 'POST', headers };
  // The key goes out only once the handshake has shown the server is the trusted one. (Node
  // calls createConnection only when no agent is given; agent: false would make one.)
  if (trust) args.createConnection = (_o, done) => void connectTrusted(link, trust, done as (err: Error | null, s?: Socket) => void);
  else args.agent = false;
  return new Promise((resolve, reject) => {
    const req = request(args, resolve);
    req.on('error', (err) => {
      if (isRefused(err)) return reject(new NoServerError(`no server at ${where}`));
      // Plain HTTP to an HTTPS server gets the connection closed or an answer that is no HTTP.
      const code = (err as NodeJS.ErrnoException).code ?? '';
      const hint = !trust && (code === 'ECONNRESET' || code.startsWith('HPE_')) ? ' (a server on HTTPS needs -tls-cert <its certificate or CA>)' : '';
      reject(new Error(`cannot talk to the server at ${where}: ${err.message}${hint}`));
    });
    req.end(data);
  });
}

interface Trust {
  file: string;
  pems: string[];
  fingerprints: Set<string>;
}

function readTrust(file: string): Trust {
  const pems = readFileSync(file, 'utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (pems.length === 0) throw new Error(`-tls-cert ${file} holds no PEM certificate`);
  return { file, pems, fingerprints: new Set(pems.map((p) => new X509Certificate(p).fingerprint256)) };
}

function connectTrusted(link: ServerLink, trust: Trust, done: (err: Error | null, s?: Socket) => void): void {
  const socket = tlsConnect({
    host: link.host,
    port: link.port,
    ca: trust.pems,
    ...(isIP(link.host) ? {} : { servername: link.host }),
    ALPNProtocols: ['http/1.1'],
    // Checked below instead: a pinned certificate is trusted whatever name it carries.
    rejectUnauthorized: false,
  });
  socket.once('error', (err) => done(err));
  socket.once('secureConnect', () => {
    const peer = socket.getPeerCertificate() as PeerCertificate;
    const pinned = trust.fingerprints.has(peer.fingerprint256);
    const why = pinned ? undefined : !socket.authorized ? String(socket.authorizationError) : checkServerIdentity(link.host, peer)?.message;
    if (why === undefined) return done(null, socket);
    socket.destroy();
    done(new Error(`its certificate is neither in ${trust.file} nor signed by one there (${why})`));
  });
}

/** ECONNREFUSED, also when every address a name resolved to refused (Node's AggregateError). */
function isRefused(err: unknown): boolean {
  const e = err as NodeJS.ErrnoException & { errors?: unknown[] };
  if (e.code === 'ECONNREFUSED') return true;
  return Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every(isRefused);
}
