/**
 * Who is calling. Modules that own resources (contexts, stored responses)
 * key them with libs/http identity.ts ownerKey and answer 404 (never 403) when
 * the key differs: another caller's resource does not exist for you.
 */
export interface Caller {
  /** The caller's name: from the callers file, the token's name claim, or the client certificate. */
  name: string;
  /** A level from -classification-levels; absent means no clearance. */
  clearance?: string;
  compartments: string[];
  /** Retrieval labels the caller may read. */
  labels: string[];
  /**
   * True when the server does not name its callers: no credential at all,
   * or a bare -api-key. Anonymous callers share one owner.
   */
  anonymous: boolean;
  /** How the caller proved who it is. */
  via: 'none' | 'api-key' | 'callers-file' | 'token' | 'client-certificate';
}

/** The caller on a server with no credential sources. */
export const ANONYMOUS: Caller = Object.freeze({ name: 'anonymous', compartments: [], labels: [], anonymous: true, via: 'none' }) as Caller;

/** Name of the caller presenting one of the bare -api-key keys. */
export const API_KEY_CALLER = 'api-key';
