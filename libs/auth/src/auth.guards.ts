import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { FastifyReply, FastifyRequest } from 'fastify';
import { AuthService } from './auth.service';

/**
 * Every routed request, in this order:
 * 1. browser origins: cross-origin POST/PUT/DELETE not in -cors → 403; studio
 *    and MCP check Host and Origin against the serving address (403/421);
 * 2. credentials: API key, callers-file key, directory token or client
 *    certificate → the Caller; else 401;
 * 3. classification markings under -classification: 400 malformed, 403 not
 *    cleared / not declared.
 * One guard rather than three: Nest awaits each guard in turn on every request.
 * The request hook (auth.hooks.ts) runs the same admit() before the body is
 * read; a request it admitted passes here without the checks run twice.
 */
@Injectable()
export class AuthGuard implements CanActivate {
  constructor(@Inject(AuthService) private readonly auth: AuthService) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    if (ctx.getType() !== 'http') return true;
    const h = ctx.switchToHttp();
    const req = h.getRequest<FastifyRequest>();
    if (req.svcAdmitted) return true;
    await this.auth.admit(req, h.getResponse<FastifyReply>());
    return true;
  }
}
