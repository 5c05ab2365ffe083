import { createRemoteJWKSet, JWTPayload, jwtVerify } from 'jose';
import { OidcConfig } from './auth-config';

/** Three base64url segments: a compact JWS. */
export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token);
}

/**
 * Directory sign-in: verifies bearer JWTs against the issuer's JWKS (signature,
 * `iss`, `aud` when -oidc-audience is set, and `exp`, which must be present).
 * The JWKS URL is -oidc-jwks, else the `jwks_uri` of the issuer's discovery
 * document, else <issuer>/.well-known/jwks.json. jose caches the key set and
 * refetches it when a token names an unknown `kid`.
 */
export class OidcVerifier {
  private keys?: Promise<ReturnType<typeof createRemoteJWKSet>>;

  constructor(private readonly cfg: OidcConfig) {}

  async verify(token: string): Promise<JWTPayload> {
    const keys = await this.keySet();
    const { payload } = await jwtVerify(token, keys, {
      issuer: this.cfg.issuer,
      audience: this.cfg.audience,
      requiredClaims: ['exp'],
      clockTolerance: 5,
    });
    return payload;
  }

  private keySet(): Promise<ReturnType<typeof createRemoteJWKSet>> {
    if (!this.keys) {
      this.keys = this.jwksUrl().then((u) => createRemoteJWKSet(new URL(u), { timeoutDuration: 5000, cooldownDuration: 30_000 }));
      // A failed discovery is retried on the next token.
      this.keys.catch(() => (this.keys = undefined));
    }
    return this.keys;
  }

  private async jwksUrl(): Promise<string> {
    if (this.cfg.jwks) return this.cfg.jwks;
    const base = this.cfg.issuer.replace(/\/+$/, '');
    try {
      const r = await fetch(`${base}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(5000) });
      if (r.ok) {
        const doc = (await r.json()) as { jwks_uri?: unknown };
        if (typeof doc.jwks_uri === 'string') return doc.jwks_uri;
      }
    } catch {
      // no discovery document: fall back below
    }
    return `${base}/.well-known/jwks.json`;
  }
}

/** A claim as a list: an array of strings, or one string split on spaces, commas or slashes. */
export function claimList(v: unknown): string[] {
  if (Array.isArray(v)) return v.filter((x): x is string => typeof x === 'string' && x !== '');
  if (typeof v === 'string') return v.split(/[\s,/]+/).filter(Boolean);
  return [];
}
