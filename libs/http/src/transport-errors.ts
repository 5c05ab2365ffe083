import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Socket } from 'node:net';
import { errorBody, statusText } from './http-errors';

/**
 * Errors Fastify and Node answer before any route or Nest filter runs, answered in the spec's error
 * shape instead of Fastify's own ({"error","code","message","statusCode"}).
 */

/** A URL Fastify cannot decode (a bad percent-escape): 400. */
export function frameworkErrors(error: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const path = req.url.split('?')[0];
  const status = error.statusCode && error.statusCode >= 400 ? error.statusCode : 400;
  const message = error.code === 'FST_ERR_BAD_URL' ? `malformed URL: ${req.url} is not a valid URL (a bad percent-escape?)` : error.message;
  void reply.code(status).send(errorBody(path, status, message));
}

/**
 * A request Node's HTTP parser refused (headers over its limit, bad syntax) or a timed-out one:
 * written to the socket, which is then closed, as Node and Fastify do.
 */
export function clientErrorHandler(err: Error & { code?: string; rawPacket?: unknown }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, message] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'the request took too long to arrive']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'the request headers are larger than this server accepts']
        : [400, `malformed HTTP request${err.code ? ` (${err.code})` : ''}`];
  // The request line, where the parser got that far, decides the dialect of the body.
  const raw = Buffer.isBuffer(err.rawPacket) ? err.rawPacket.toString('latin1', 0, 2048) : '';
  const path = /^[A-Z]+ (\/[^ ?]*)/.exec(raw)?.[1] ?? '/';
  const body = JSON.stringify(errorBody(path, status, message));
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${statusText(status)}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy(err);
}

/**
 * Requests that arrive while the server stops (on a kept-alive connection) get 503 in the spec's
 * shape, and their connection closes; Fastify's own refusal (return503OnClosing) had its shape.
 */
export function refuseWhileClosing(fastify: FastifyInstance): void {
  let closing = false;
  fastify.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  fastify.addHook('onRequest', (req, reply, done) => {
    if (!closing) return done();
    void reply
      .code(503)
      .header('connection', 'close')
      .send(errorBody(req.url.split('?')[0], 503, 'the server is shutting down'));
  });
}
