import { HttpException, Inject, Injectable, Logger } from '@nestjs/common';
import { FastifyReply, FastifyRequest } from 'fastify';
import { ServerConfig, SERVER_CONFIG } from '../../../apps/server/src/config/server-config';
import { AuthConfig } from './auth-config';
import { CallerEntry } from './callers-file';
import { ANONYMOUS, API_KEY_CALLER, Caller } from './caller';
import { certificateName } from './client-cert';
import { KeyRing, storedKeyDigest } from './keys';
import { clearanceFailure, levelRank, Marking, MarkingSyntaxError, normalizeCompartment, parseMarking } from './marking';
import { claimList, looksLikeJwt, OidcVerifier } from './oidc';
import { header, keylessHostRefusal, localSurface, localSurfaceRefusal, mutationRefusal, RequestView } from './origin';
import { hostname } from 'node:os';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth guards: who is calling. */
    svcCaller?: Caller;
    /** Set by the auth guards: the request's X-Classification marking (null when none was declared). */
    svcMarking?: Marking | null;
    /** Set by the request hook once this request passed admit(): the guard need not repeat it. */
    svcAdmitted?: boolean;
  }
}

export const UNAUTHORIZED_MESSAGE = 'this server requires an API key: send Authorization: Bearer <API_KEY>';
export const WWW_AUTHENTICATE = 'Bearer realm=svc';
export const MISSING_MARKING = 'the server requires every request to declare its classification';

/**
 * The policy behind the guards: browser origins, credentials, markings. The
 * guards (routed requests) and the request hook (requests no route matched)
 * both call it, so the rules live in one place.
 */
@Injectable()
export class AuthService {
  private readonly log = new Logger('auth');
  readonly cfg: AuthConfig;
  /** True once any credential source exists (keys, callers file, directory, client CA). */
  readonly required: boolean;
  /**
   * Callers have names (a callers file, directory sign-in, client certificates): what belongs to
   * one caller or is cleared for some (contexts, labelled documents) is kept apart. A bare
   * -api-key alone names nobody.
   */
  readonly namesCallers: boolean;
  private readonly ring = new KeyRing<Caller>();
  private readonly profiles = new Map<string, CallerEntry>();
  private readonly oidc?: OidcVerifier;

  constructor(@Inject(SERVER_CONFIG) private readonly config: ServerConfig) {
    this.cfg = config.auth;
    for (const key of config.apiKeys) {
      // Only a -api-key value can hold one ($SVC_API_KEY is split on commas): once, that was two keys.
      if (key.includes(',')) this.log.warn('an -api-key value holds a comma: it is one key, taken whole; give each key its own -api-key');
      this.ring.add(storedKeyDigest(key), { name: API_KEY_CALLER, compartments: [], labels: [], anonymous: true, via: 'api-key' });
    }
    for (const c of this.cfg.callers) {
      this.profiles.set(c.name, c);
      const caller: Caller = { name: c.name, clearance: c.clearance, compartments: c.compartments, labels: c.labels, anonymous: false, via: 'callers-file' };
      for (const d of c.digests) this.ring.add(d, caller);
    }
    if (this.cfg.oidc) this.oidc = new OidcVerifier(this.cfg.oidc);
    this.required = this.ring.size > 0 || !!this.cfg.callersFile || !!this.cfg.oidc || !!this.cfg.tlsClientCa;
    this.namesCallers = !!this.cfg.callersFile || !!this.cfg.oidc || !!this.cfg.tlsClientCa;
    if (this.cfg.classification.enabled && !this.required) {
      this.log.warn('-classification without a credential source: every caller is anonymous and holds no clearance');
    }
  }

  /** GET /healthz never needs a credential or a marking. */
  isOpen(req: FastifyRequest): boolean {
    return (req.method === 'GET' || req.method === 'HEAD') && pathOf(req) === '/healthz';
  }

  view(req: FastifyRequest): RequestView {
    const sock = req.raw.socket;
    return {
      method: req.method,
      path: pathOf(req),
      headers: req.headers,
      scheme: (sock as { encrypted?: boolean } | undefined)?.encrypted ? 'https' : 'http',
      // Read when a rule asks: on a new connection each is a getsockname/getpeername call.
      get localAddress() {
        return sock?.localAddress;
      },
      get localPort() {
        return sock?.localPort;
      },
      get remoteAddress() {
        return sock?.remoteAddress;
      },
      listenHost: this.config.host,
    };
  }

  /** Browser-origin rules: studio/MCP rebinding defence, cross-origin mutations, then a keyless server's own Host check. */
  checkOrigin(req: FastifyRequest): void {
    const v = this.view(req);
    const surface = localSurface(v.path);
    const refusal =
      (surface && localSurfaceRefusal(v, surface)) || mutationRefusal(v, this.cfg.cors) || (!this.required ? keylessHostRefusal(v, this.cfg.cors, MACHINE) : null);
    if (refusal) throw new HttpException(refusal.message, refusal.status);
  }

  /** Who is calling; 401 (with WWW-Authenticate) when a credential is needed and missing or wrong. */
  async authenticate(req: FastifyRequest, reply?: FastifyReply): Promise<Caller> {
    if (req.svcCaller) return req.svcCaller;
    const caller = await this.identify(req);
    if (!caller) {
      reply?.header('www-authenticate', WWW_AUTHENTICATE);
      throw new HttpException(UNAUTHORIZED_MESSAGE, 401);
    }
    req.svcCaller = caller;
    return caller;
  }

  private async identify(req: FastifyRequest): Promise<Caller | undefined> {
    if (!this.required) return ANONYMOUS;
    const presented: string[] = [];
    const auth = header(req, 'authorization');
    const bearer = auth && /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (bearer) presented.push(bearer[1]);
    const apiKey = header(req, 'x-api-key');
    if (apiKey) presented.push(apiKey.trim());
    // Keys and tokens are checked only where the server has keys or a directory;
    // on a client-certificate-only server an SDK's placeholder key is ignored (rule 7).
    const checkable = this.ring.size > 0 || !!this.oidc;
    if (!checkable) presented.length = 0;
    else if (auth && !bearer) return undefined; // an Authorization scheme other than Bearer is a wrong credential
    // Every credential presented must be right and name the same caller: a wrong one beside a
    // right one was ignored, and two callers' keys named whichever header came first.
    let found: Caller | undefined;
    for (const cred of presented) {
      const c = this.oidc && looksLikeJwt(cred) ? await this.fromToken(cred) : this.ring.match(cred);
      if (!c || (found && found.name !== c.name)) return undefined;
      found ??= c;
    }
    if (found) return found;
    // A presented credential that failed is a wrong credential, even over mTLS.
    if (presented.length > 0) return undefined;
    if (this.cfg.tlsClientCa) {
      const name = certificateName(req.raw.socket);
      if (name) return this.named(name, 'client-certificate');
    }
    return undefined;
  }

  private async fromToken(token: string): Promise<Caller | undefined> {
    let claims: Record<string, unknown>;
    try {
      claims = (await this.oidc!.verify(token)) as Record<string, unknown>;
    } catch (err) {
      this.log.debug(`token refused: ${(err as Error).message}`);
      return undefined;
    }
    const o = this.cfg.oidc!;
    const name = claims[o.nameClaim];
    if (typeof name !== 'string' || name === '') return undefined;
    const caller = this.named(name, 'token');
    if (o.clearanceClaim && claims[o.clearanceClaim] !== undefined) {
      const r = levelRank(this.cfg.classification.levels, String(claims[o.clearanceClaim]));
      caller.clearance = r >= 0 ? this.cfg.classification.levels[r] : undefined;
    }
    if (o.compartmentsClaim && claims[o.compartmentsClaim] !== undefined) {
      caller.compartments = claimList(claims[o.compartmentsClaim]).map(normalizeCompartment);
    }
    return caller;
  }

  /** A caller named by a certificate or token; a callers-file entry of that name supplies clearance, compartments and labels. */
  private named(name: string, via: Caller['via']): Caller {
    const p = this.profiles.get(name);
    return { name, clearance: p?.clearance, compartments: [...(p?.compartments ?? [])], labels: [...(p?.labels ?? [])], anonymous: false, via };
  }

  /** The request's marking (null when markings are off or none was declared and none is required); 400/403 otherwise. */
  classify(req: FastifyRequest, caller: Caller): Marking | null {
    const cls = this.cfg.classification;
    if (!cls.enabled) return (req.svcMarking = null);
    const raw = header(req, 'x-classification');
    if (raw === undefined || raw.trim() === '') {
      if (cls.required) throw new HttpException(MISSING_MARKING, 403);
      return (req.svcMarking = null);
    }
    let marking: Marking;
    try {
      marking = parseMarking(raw, cls.levels);
    } catch (err) {
      if (err instanceof MarkingSyntaxError) throw new HttpException(`malformed X-Classification "${raw}": ${err.message}`, 400);
      throw err;
    }
    const refusal = clearanceFailure(caller, marking, cls.levels);
    if (refusal) throw new HttpException(refusal, 403);
    req.svcMarking = marking;
    return marking;
  }

  /** All three checks, in the guards' order (used for requests no route matched). */
  async admit(req: FastifyRequest, reply?: FastifyReply): Promise<void> {
    if (this.isOpen(req)) return;
    this.checkOrigin(req);
    const caller = await this.authenticate(req, reply);
    this.classify(req, caller);
  }
}

/** This machine's name, read once (a keyless server's Host check allows it). */
const MACHINE = hostname();

/**
 * The path as the router sees it: up to `?` or `#`, percent-escapes decoded
 * as decodeURI does (find-my-way's rule; reserved characters such as %2F stay
 * encoded), so `/%6dcp` is `/mcp` here too.
 */
export function pathOf(req: { url?: string }): string {
  const raw = (req.url ?? '').split(/[?#]/)[0];
  if (!raw.includes('%')) return raw;
  try {
    return decodeURI(raw);
  } catch {
    return raw; // malformed escapes: the router answers 400 for it
  }
}
