import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import { FastifyRequest } from 'fastify';
import { ANONYMOUS, Caller } from './caller';
import { Marking } from './marking';

/** The request's caller (set by the global auth guards). */
export const CurrentCaller = createParamDecorator((_d: unknown, ctx: ExecutionContext): Caller => callerOf(ctx.switchToHttp().getRequest<FastifyRequest>()));

/** The request's X-Classification marking, or null (markings off, or none declared where not required). */
export const CurrentMarking = createParamDecorator(
  (_d: unknown, ctx: ExecutionContext): Marking | null => markingOf(ctx.switchToHttp().getRequest<FastifyRequest>()),
);

export function callerOf(req: FastifyRequest): Caller {
  return req.svcCaller ?? ANONYMOUS;
}

export function markingOf(req: FastifyRequest): Marking | null {
  return req.svcMarking ?? null;
}
