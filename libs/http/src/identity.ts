import { FastifyRequest } from 'fastify';
import { callerOf, markingOf } from '../../auth/src/decorators';

/**
 * Who is asking, as the auth layer (libs/auth) records it on the request: the
 * caller's name ('' for the anonymous or shared-key caller) and the request's
 * canonical classification ('' without markings). Modules that own resources
 * (contexts, responses) key them by both.
 */
export interface RequestIdentity {
  owner: string;
  marking: string;
}

export function requestIdentity(req: FastifyRequest): RequestIdentity {
  const caller = callerOf(req);
  return { owner: caller.anonymous ? '' : caller.name, marking: markingOf(req)?.canonical ?? '' };
}

/**
 * The key resources are stored under: the caller, at the marking they were
 * made. Injective (a caller's name may hold "//", as markings do); the
 * anonymous caller without a marking keeps the engine's default owner ''.
 */
export function ownerKey(id: RequestIdentity): string {
  return id.owner === '' && id.marking === '' ? '' : JSON.stringify([id.owner, id.marking]);
}
