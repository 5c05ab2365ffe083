import { FastifyRequest } from 'fastify';

/**
 * Who is asking, as the auth layer (libs/auth) records it on the request:
 * `svcOwner` names the caller ('' on a server without named callers) and
 * `svcMarking` the request's classification ('' without markings). Modules
 * that own resources (contexts, responses) key them by both.
 */
export interface RequestIdentity {
  owner: string;
  marking: string;
}

export function requestIdentity(req: FastifyRequest): RequestIdentity {
  const r = req as FastifyRequest & { svcOwner?: string; svcMarking?: string };
  return { owner: r.svcOwner ?? '', marking: r.svcMarking ?? '' };
}

/** The key resources are stored under: the caller, at the marking they were made. */
export function ownerKey(id: RequestIdentity): string {
  return id.marking ? `${id.owner}//${id.marking}` : id.owner;
}
