import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import { FastifyRequest } from 'fastify';
import { InvalidRequestError } from '../../engine/src/core/errors';

/**
 * One query parameter as a string (undefined when absent). A name sent twice (`?model=a&model=b`)
 * reaches a handler as an array, which the routes below it took for a string (a 500): it is a
 * 400 here.
 */
export const QueryParam = createParamDecorator((name: string, ctx: ExecutionContext): string | undefined => {
  const query = ctx.switchToHttp().getRequest<FastifyRequest>().query as Record<string, unknown> | undefined;
  const v = query?.[name];
  if (v === undefined || typeof v === 'string') return v;
  throw new InvalidRequestError(`cannot parse request: the query parameter ${name} is given more than once`);
});
