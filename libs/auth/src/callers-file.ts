import { Logger } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { load as loadYaml } from 'js-yaml';
import { isCompartmentName, levelRank, normalizeCompartment } from './marking';
import { storedKeyDigest } from './keys';

/** One named caller from -callers, with its keys held as sha256 digests. */
export interface CallerEntry {
  name: string;
  digests: Buffer[];
  clearance?: string;
  compartments: string[];
  labels: string[];
}

/**
 * Reads a callers file: JSON or YAML (YAML is a superset, so one parser reads
 * both), either a list of callers or an object with a `callers` list. Throws
 * an Error naming the problem.
 */
export function loadCallersFile(path: string, levels: string[]): CallerEntry[] {
  // Editors on some systems start a UTF-8 file with a byte-order mark, which JSON.parse refuses.
  const text = readFileSync(path, 'utf8').replace(/^\uFEFF/, '');
  let doc: unknown;
  try {
    doc = text.trim().startsWith('{') || text.trim().startsWith('[') ? JSON.parse(text) : loadYaml(text);
  } catch (err) {
    // js-yaml's message quotes the lines around the fault, keys included: only its reason and place go to the logs.
    const y = err as { reason?: string; mark?: { line: number; column: number } };
    const why = y.reason !== undefined && y.mark ? `${y.reason} at line ${y.mark.line + 1}, column ${y.mark.column + 1}` : (err as Error).message;
    throw new Error(`callers file ${path}: ${why}`);
  }
  return parseCallers(doc, levels, path);
}

const CALLER_FIELDS = ['name', 'keys', 'clearance', 'compartments', 'labels'];

export function parseCallers(doc: unknown, levels: string[], source = 'callers'): CallerEntry[] {
  const list = Array.isArray(doc) ? doc : (doc as { callers?: unknown } | null)?.callers;
  if (!Array.isArray(list)) throw new Error(`${source}: expected a list of callers (or an object with "callers")`);
  const seen = new Set<string>();
  return list.map((raw, i) => {
    const at = `${source}: callers[${i}]`;
    if (!raw || typeof raw !== 'object') throw new Error(`${at} is not an object`);
    const c = raw as Record<string, unknown>;
    if (typeof c.name !== 'string' || c.name.trim() === '') throw new Error(`${at}.name must be a non-empty string`);
    const name = c.name.trim();
    if (seen.has(name)) throw new Error(`${at}: the name ${name} is used twice`);
    // A misspelt field ("clearence") left the caller with no clearance, silently.
    const unknown = Object.keys(c).filter((k) => !CALLER_FIELDS.includes(k));
    if (unknown.length) throw new Error(`${at}: unknown field ${unknown.map((k) => `"${k}"`).join(', ')} (a caller has ${CALLER_FIELDS.join(', ')})`);
    seen.add(name);
    const strings = (k: string): string[] => {
      const v = c[k] ?? [];
      if (!Array.isArray(v) || v.some((x) => typeof x !== 'string' || x === '')) throw new Error(`${at}.${k} must be a list of strings`);
      return v as string[];
    };
    let clearance: string | undefined;
    if (c.clearance !== undefined && c.clearance !== null && c.clearance !== '') {
      if (typeof c.clearance !== 'string') throw new Error(`${at}.clearance must be a string`);
      const r = levelRank(levels, c.clearance);
      if (r < 0) throw new Error(`${at}.clearance "${c.clearance}" is not one of ${levels.join(', ')}`);
      clearance = levels[r];
    }
    return {
      name,
      digests: strings('keys').map((k) => {
        if (/^[0-9a-fA-F]{64}$/.test(k.trim())) {
          // sha256sum prints bare hex: written so, the hash itself is the key that works.
          new Logger('auth').warn(`${at}: a key of ${name} is 64 hex digits without "sha256:"; it is taken as the key itself, not as a key's hash`);
        }
        return storedKeyDigest(k);
      }),
      clearance,
      compartments: strings('compartments').map((c) => {
        // One no marking can name would never match: refused rather than silently useless.
        if (!isCompartmentName(c)) throw new Error(`${at}.compartments: "${c}" is not letters, digits, underscore, hyphen or dot`);
        return normalizeCompartment(c);
      }),
      labels: strings('labels'),
    };
  });
}
