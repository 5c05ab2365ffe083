import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { FastifyReply, FastifyRequest } from 'fastify';
import { AuthService } from './auth.service';

function http(ctx: ExecutionContext): { req: FastifyRequest; reply: FastifyReply } | null {
  if (ctx.getType() !== 'http') return null;
  const h = ctx.switchToHttp();
  return { req: h.getRequest<FastifyRequest>(), reply: h.getResponse<FastifyReply>() };
}

/**
 * 1. Browser origins: cross-origin POST/PUT/DELETE not in -cors → 403; studio
 *    and MCP check Host and Origin against the serving address (403/421).
 */
@Injectable()
export class OriginGuard implements CanActivate {
  constructor(@Inject(AuthService) private readonly auth: AuthService) {}

  canActivate(ctx: ExecutionContext): boolean {
    const h = http(ctx);
    if (!h || this.auth.isOpen(h.req)) return true;
    this.auth.checkOrigin(h.req);
    return true;
  }
}

/** 2. Credentials: API key, callers-file key, directory token or client certificate → the Caller; else 401. */
@Injectable()
export class CallerGuard implements CanActivate {
  constructor(@Inject(AuthService) private readonly auth: AuthService) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const h = http(ctx);
    if (!h || this.auth.isOpen(h.req)) return true;
    await this.auth.authenticate(h.req, h.reply);
    return true;
  }
}

/** 3. Classification markings under -classification: 400 malformed, 403 not cleared / not declared. */
@Injectable()
export class ClassificationGuard implements CanActivate {
  constructor(@Inject(AuthService) private readonly auth: AuthService) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const h = http(ctx);
    if (!h || this.auth.isOpen(h.req)) return true;
    this.auth.classify(h.req, await this.auth.authenticate(h.req, h.reply));
    return true;
  }
}
