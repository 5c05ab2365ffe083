import { ArgumentsHost, Catch, ExceptionFilter, Logger } from '@nestjs/common';
import { FastifyReply, FastifyRequest } from 'fastify';
import { NoModelError } from '../../engine/src/core/errors';
import { isLingering } from './body-parsing';
import { errorBody, toHttpFailure } from './http-errors';
import { failHijacked } from './sse';

/**
 * Shapes every error the same way for its dialect. A stream that has started
 * cannot change its status: it is cut off instead (no [DONE] frame), which
 * clients treat as truncated. A stream that has not sent anything yet answers
 * with the error like any request.
 */
@Catch()
export class HttpErrorFilter implements ExceptionFilter {
  private readonly log = new Logger('http');

  catch(err: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const req = http.getRequest<FastifyRequest>();
    const reply = http.getResponse<FastifyReply>();
    const f = toHttpFailure(err);
    // 501 is a route svc does not offer (the runner's push, create, blobs), and "aborted" a body
    // its client stopped sending (the client is gone): neither is a fault of the server.
    const clientLeft = f.message === 'aborted' && (req.raw.destroyed || req.raw.socket?.destroyed === true);
    // The no-model state (503) is the server's state, said at boot: each refusal is no new fault.
    if (err instanceof NoModelError) this.log.warn(`${req.method} ${req.url}: ${f.message}`);
    else if (f.status >= 500 && f.status !== 501 && !clientLeft) this.log.error(`${req.method} ${req.url}: ${f.message}`, (err as Error)?.stack);
    const path = (req.url ?? '').split('?')[0];
    if (reply.raw.headersSent || reply.sent) {
      // hijacked by a StreamWriter (reply.sent): answered on the raw response
      failHijacked(reply, f.status, f.status === 429 ? undefined : errorBody(path, f.status, f.message), f.headers);
      return;
    }
    for (const [k, v] of Object.entries(f.headers ?? {})) reply.header(k, v);
    if (isLingering(err)) reply.removeHeader('connection');
    // 429 answers with an empty body (spec): clients retry after Retry-After.
    if (f.status === 429) {
      void reply.status(429).send();
      return;
    }
    void reply.status(f.status).type('application/json').send(errorBody(path, f.status, f.message));
  }
}
