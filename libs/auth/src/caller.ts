import { Marking } from './marking';

/**
 * Who is calling. Modules that own resources (contexts, stored responses)
 * key them with ownerKey(caller, marking) and answer 404 (never 403) when the
 * key differs: another caller's resource does not exist for you.
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

/**
 * The owner of a resource made by `caller` under `marking`. Equal keys mean the
 * same owner. Anonymous callers share the owner "" (per marking); a resource
 * made under one marking is not the same caller's resource under another.
 */
export function ownerKey(caller: Caller, marking?: Marking | null): string {
  return JSON.stringify([caller.anonymous ? '' : caller.name, marking?.canonical ?? '']);
}

/** True when `caller` under `marking` owns a resource stored with `owner`. */
export function owns(owner: string, caller: Caller, marking?: Marking | null): boolean {
  return owner === ownerKey(caller, marking);
}
