import { CallHandler, ExecutionContext, Inject, Injectable, NestInterceptor } from '@nestjs/common';
import { FastifyReply, FastifyRequest } from 'fastify';
import { Observable } from 'rxjs';
import { AuthService } from './auth.service';
import { header } from './origin';

/** The X-Classification header as the response echoes it (the value the request sent). */
export function echoClassification(auth: AuthService, req: FastifyRequest, reply: FastifyReply): void {
  if (!auth.cfg.classification.enabled) return;
  const v = header(req, 'x-classification');
  if (v !== undefined && v !== '' && !/[\r\n]/.test(v)) reply.header('x-classification', v);
}

/**
 * Rule 6: the response echoes X-Classification. Set before the handler runs so
 * streamed answers (which copy the reply's headers) carry it too. Refusals
 * from the guards get it from the request hook (auth.hooks.ts).
 */
@Injectable()
export class ClassificationEchoInterceptor implements NestInterceptor {
  constructor(@Inject(AuthService) private readonly auth: AuthService) {}

  intercept(ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (ctx.getType() === 'http') {
      const h = ctx.switchToHttp();
      echoClassification(this.auth, h.getRequest<FastifyRequest>(), h.getResponse<FastifyReply>());
    }
    return next.handle();
  }
}
