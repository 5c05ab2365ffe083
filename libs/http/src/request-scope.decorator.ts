import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import { FastifyReply, FastifyRequest } from 'fastify';
import type { RequestScope } from '../../engine/src/core/generation-request';
import { ownerKey, requestIdentity } from './identity';

/**
 * An AbortSignal that fires when the client goes away before the answer is
 * complete; the scheduler frees the sequence at its next step.
 */
export function clientSignal(reply: FastifyReply): AbortSignal {
  const ac = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) ac.abort();
  });
  return ac.signal;
}

/** The client's signal. */
export const ClientSignal = createParamDecorator((_data: unknown, ctx: ExecutionContext): AbortSignal => clientSignal(ctx.switchToHttp().getResponse<FastifyReply>()));

/**
 * The client's signal and the owner key (caller and marking) of what a
 * generation touches: the named session (svc_session) it runs on belongs to
 * whoever made it, as every context does.
 */
export const ScopeOfRequest = createParamDecorator((_data: unknown, ctx: ExecutionContext): RequestScope => {
  const http = ctx.switchToHttp();
  return { signal: clientSignal(http.getResponse<FastifyReply>()), owner: ownerKey(requestIdentity(http.getRequest<FastifyRequest>())) };
});
