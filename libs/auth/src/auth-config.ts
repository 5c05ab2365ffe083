import { FlagError, FlagValues } from '../../../apps/server/src/config/flags';
import { CallerEntry, loadCallersFile } from './callers-file';
import { storedKeyDigest } from './keys';
import { DEFAULT_LEVELS, MarkingSyntaxError, parseLevels } from './marking';
import { parseCorsOrigins } from './origin';

export interface OidcConfig {
  issuer: string;
  audience?: string;
  /** JWKS URL; absent: discovered from <issuer>/.well-known/openid-configuration, else <issuer>/.well-known/jwks.json. */
  jwks?: string;
  nameClaim: string;
  clearanceClaim?: string;
  compartmentsClaim?: string;
}

/** Everything the auth layer needs, resolved at startup (bad values are startup errors). */
export interface AuthConfig {
  callersFile?: string;
  callers: CallerEntry[];
  oidc?: OidcConfig;
  /** PEM bundle of CAs whose client certificates are accepted (mTLS). */
  tlsClientCa?: string;
  /** Normalized -cors origins. */
  cors: string[];
  classification: { enabled: boolean; required: boolean; levels: string[] };
  enterprise: boolean;
  insecure: boolean;
  /** Snapshot modules: refuse pre-0.3.0 snapshots (enterprise profile or markings, unless -allow-legacy-snapshots). */
  refuseLegacySnapshots: boolean;
}

/** Builds the auth section of the server config from the flags; throws FlagError on bad input. */
export function buildAuthConfig(f: FlagValues): AuthConfig {
  const enterprise = f.profile === 'enterprise';
  const insecure = f.insecure === true;
  let levels = DEFAULT_LEVELS;
  if (typeof f['classification-levels'] === 'string') {
    try {
      levels = parseLevels(f['classification-levels']);
    } catch (err) {
      throw new FlagError(`flag -classification-levels: ${(err as MarkingSyntaxError).message}`);
    }
  }
  if (enterprise && f['require-classification'] === false) throw new FlagError('-profile enterprise requires classification markings; drop -require-classification=false');
  if (enterprise && f['studio-exec'] === true) throw new FlagError('-profile enterprise does not allow -studio-exec');
  if (enterprise && !f['tls-cert'] && !insecure) {
    throw new FlagError('-profile enterprise expects TLS: give -tls-cert and -tls-key (or -insecure to serve plain HTTP anyway)');
  }
  const enabled = enterprise || f.classification === true;
  const required = enterprise || (enabled && f['require-classification'] !== false);
  const tlsClientCa = f['tls-client-ca'] as string | undefined;
  if (tlsClientCa && !f['tls-cert']) throw new FlagError('flag -tls-client-ca needs -tls-cert (client certificates are checked over HTTPS)');
  const callersFile = f.callers as string | undefined;
  let callers: CallerEntry[] = [];
  if (callersFile) {
    try {
      callers = loadCallersFile(callersFile, levels);
    } catch (err) {
      throw new FlagError(`flag -callers: ${(err as Error).message}`);
    }
  }
  oneCallerPerKey((f['api-key'] as string[] | undefined) ?? [], callers);
  let oidc: OidcConfig | undefined;
  const issuer = f['oidc-issuer'] as string | undefined;
  for (const k of ['oidc-audience', 'oidc-jwks', 'oidc-name-claim', 'oidc-clearance-claim', 'oidc-compartments-claim']) {
    if (f[k] !== undefined && !issuer) throw new FlagError(`flag -${k} needs -oidc-issuer`);
  }
  if (issuer) {
    for (const [k, v] of [['oidc-issuer', issuer], ['oidc-jwks', f['oidc-jwks']]] as const) {
      if (v === undefined) continue;
      try {
        const u = new URL(String(v));
        if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error();
      } catch {
        throw new FlagError(`flag -${k} wants an http(s) URL, got "${v}"`);
      }
    }
    oidc = {
      issuer,
      audience: f['oidc-audience'] as string | undefined,
      jwks: f['oidc-jwks'] as string | undefined,
      nameClaim: (f['oidc-name-claim'] as string | undefined) ?? 'sub',
      clearanceClaim: f['oidc-clearance-claim'] as string | undefined,
      compartmentsClaim: f['oidc-compartments-claim'] as string | undefined,
    };
  }
  let cors: string[];
  try {
    cors = parseCorsOrigins((f.cors as string[] | undefined) ?? []);
  } catch (err) {
    throw new FlagError((err as Error).message);
  }
  return {
    callersFile,
    callers,
    oidc,
    tlsClientCa,
    cors,
    classification: { enabled, required, levels },
    enterprise,
    insecure,
    refuseLegacySnapshots: (enterprise || enabled) && f['allow-legacy-snapshots'] !== true,
  };
}

/** A key two callers share (or a caller and -api-key) made the first listed one win, silently. */
function oneCallerPerKey(apiKeys: string[], callers: CallerEntry[]): void {
  const owner = new Map<string, string>();
  for (const k of apiKeys) owner.set(storedKeyDigest(k).toString('hex'), '-api-key');
  for (const c of callers) {
    for (const d of c.digests) {
      const hex = d.toString('hex');
      const prev = owner.get(hex);
      if (prev !== undefined && prev !== c.name) throw new FlagError(`flag -callers: a key of ${c.name} is also a key of ${prev}: each key must name one caller`);
      owner.set(hex, c.name);
    }
  }
}
