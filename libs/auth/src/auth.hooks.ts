import { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorBody, toHttpFailure } from '../../http/src/http-errors';
import { AuthService } from './auth.service';
import { EXPOSED_HEADERS, header, isPreflight, isServerOrigin, localSurface, originPermitted, preflightHeaders } from './origin';

/**
 * Rule 6: the response echoes X-Classification (the value the request sent). Set
 * on the reply before any handler runs, so refusals, 404s and streamed answers
 * (which copy the reply's headers) all carry it.
 */
export function echoClassification(auth: AuthService, req: FastifyRequest, reply: FastifyReply): void {
  if (!auth.cfg.classification.enabled) return;
  const v = header(req, 'x-classification');
  if (v !== undefined && v !== '' && !/[\r\n]/.test(v)) reply.header('x-classification', v);
}

/**
 * The part of the auth layer that must run before (or without) Nest's router:
 *  - CORS preflights (OPTIONS has no Nest route): 204, with CORS headers only
 *    for a permitted origin, and never a body;
 *  - CORS headers on answers to a permitted origin, and the X-Classification
 *    echo, set here so refusals and 404s carry them too;
 *  - the same checks the guards make, for every request, before the body is
 *    parsed; for requests no route matched (404) this is the only check, so
 *    an unknown path answers 401/403 to a caller without a credential.
 */
export function installAuthHooks(fastify: FastifyInstance, auth: AuthService): void {
  fastify.decorateRequest('svcCaller', undefined);
  fastify.decorateRequest('svcMarking', undefined);
  fastify.decorateRequest('svcAdmitted', false);
  fastify.addHook('onRequest', async (req, reply) => {
    echoClassification(auth, req, reply);
    const v = auth.view(req);
    const origin = header(v, 'origin');
    const local = localSurface(v.path);
    if (isPreflight(v)) {
      const ok = local ? isServerOrigin(origin!, v) : originPermitted(origin!, auth.cfg.cors) || isServerOrigin(origin!, v);
      if (ok) reply.headers(preflightHeaders(v));
      return reply.code(204).send();
    }
    if (origin && !local && originPermitted(origin, auth.cfg.cors)) {
      reply.headers({ 'access-control-allow-origin': origin, vary: 'Origin', 'access-control-expose-headers': EXPOSED_HEADERS });
    }
    // Every request is admitted here, before its body is read (an unauthenticated
    // client cannot make the server parse 32 MiB), and before routing decides
    // 404 (unknown paths do not reveal themselves to a caller without a key).
    // The guard skips what this admitted (the same checks, and the caller, cached).
    if (!auth.isOpen(req)) {
      try {
        await auth.admit(req, reply);
        req.svcAdmitted = true;
      } catch (err) {
        const f = toHttpFailure(err);
        return reply.code(f.status).type('application/json').send(errorBody(v.path, f.status, f.message));
      }
    }
  });
}
