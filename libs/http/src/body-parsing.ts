import { FastifyInstance } from 'fastify';
import { errorBody } from './http-errors';

/** A route with its own body limit (snapshot restore and import), decided per request. */
export interface RouteLimit {
  pattern: RegExp;
  limit(url: URL): number;
}

/** Binary bodies (snapshots, exports) are parsed up to this; each route checks its own limit first. */
const BINARY_MAX = 2 ** 31 - 1;
/** The limit the onRequest hook decided for this request, for bodies without a declared length. */
const ALLOWED = Symbol('svc.bodyLimit');

function tooLarge(size: string, allowed: number): Error {
  return Object.assign(new Error(`request body is ${size} bytes; this server accepts ${allowed}`), { statusCode: 413 });
}

/**
 * JSON bodies: 413 decided from Content-Length before anything is read, and
 * parse failures answered as "malformed JSON: <reason with offset>".
 */
export function installBodyParsing(fastify: FastifyInstance, limit: number, routeLimits: RouteLimit[] = []): void {
  fastify.addHook('onRequest', (req, reply, done) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    const path = req.url.split('?')[0];
    const special = routeLimits.find((r) => r.pattern.test(path));
    const allowed = special ? special.limit(new URL(req.url, 'http://x')) : limit;
    (req as unknown as Record<symbol, number>)[ALLOWED] = allowed;
    if (declared > allowed) {
      void reply
        .status(413)
        .header('connection', 'close')
        .send(errorBody(path, 413, `request body is ${declared} bytes; this server accepts ${allowed}`));
      return;
    }
    done();
  });
  // Counted as it arrives: a chunked upload (no Content-Length) meets the same limit.
  fastify.addContentTypeParser('application/octet-stream', { bodyLimit: BINARY_MAX }, (req, payload, done) => {
    const allowed = (req as unknown as Record<symbol, number>)[ALLOWED] ?? limit;
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    payload.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > allowed) {
        over = true;
        chunks.length = 0;
        done(tooLarge(`over ${allowed}`, allowed), undefined);
        return;
      }
      chunks.push(chunk);
    });
    payload.on('end', () => {
      if (!over) done(null, Buffer.concat(chunks, size));
    });
    payload.on('error', (err: Error) => {
      if (!over) done(err, undefined);
    });
  });
  fastify.removeContentTypeParser('application/json');
  fastify.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: limit }, (_req, body, done) => {
    const text = body as string;
    if (text.trim() === '') return done(null, {});
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      const e = Object.assign(new Error(`malformed JSON: ${(err as Error).message}`), { statusCode: 400 });
      done(e, undefined);
    }
  });
}
