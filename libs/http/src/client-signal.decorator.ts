import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import { FastifyReply } from 'fastify';

/**
 * An AbortSignal that fires when the client goes away before the answer is
 * complete; the scheduler frees the sequence at its next step.
 */
export const ClientSignal = createParamDecorator((_data: unknown, ctx: ExecutionContext): AbortSignal => {
  const reply = ctx.switchToHttp().getResponse<FastifyReply>();
  const ac = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) ac.abort();
  });
  return ac.signal;
});
