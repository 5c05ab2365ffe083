/**
 * Classification markings: `LEVEL` or `LEVEL//COMP1/COMP2`.
 * Pure functions; the guard turns their results into 400/403.
 */
export const DEFAULT_LEVELS = ['UNCLASSIFIED', 'CONFIDENTIAL', 'SECRET', 'TOP SECRET'];

export interface Marking {
  /** Canonical level name, as spelled in -classification-levels. */
  level: string;
  /** Position of the level in -classification-levels (0 = lowest). */
  rank: number;
  /** Upper-cased, de-duplicated and sorted. */
  compartments: string[];
  /** `LEVEL` or `LEVEL//A/B`, canonical spelling. */
  canonical: string;
}

export class MarkingSyntaxError extends Error {}

const COMPARTMENT = /^[A-Z0-9][A-Z0-9_.-]*$/;

const norm = (s: string): string => s.trim().replace(/\s+/g, ' ').toUpperCase();

/** Parses -classification-levels ("A,B,C", lowest first). */
export function parseLevels(spec: string): string[] {
  const levels = spec.split(',').map((s) => s.trim().replace(/\s+/g, ' ')).filter(Boolean);
  if (levels.length === 0) throw new MarkingSyntaxError('no classification levels given');
  const seen = new Set<string>();
  for (const l of levels) {
    if (l.includes('/')) throw new MarkingSyntaxError(`level "${l}" may not contain "/"`);
    if (seen.has(norm(l))) throw new MarkingSyntaxError(`level "${l}" is listed twice`);
    seen.add(norm(l));
  }
  return levels;
}

/** Index of a level name (case-insensitive), or -1. */
export function levelRank(levels: string[], name: string): number {
  const n = norm(name);
  return levels.findIndex((l) => norm(l) === n);
}

/** Parses an X-Classification value; throws MarkingSyntaxError when malformed. */
export function parseMarking(value: string, levels: string[]): Marking {
  const v = value.trim();
  if (v === '') throw new MarkingSyntaxError('empty marking');
  const parts = v.split('//');
  if (parts.length > 2) throw new MarkingSyntaxError('more than one "//"');
  const rank = levelRank(levels, parts[0]);
  if (rank < 0) throw new MarkingSyntaxError(`unknown level "${parts[0].trim()}"; levels are ${levels.join(', ')}`);
  const compartments: string[] = [];
  if (parts.length === 2) {
    const names = parts[1].split('/').map(norm);
    for (const c of names) {
      if (c === '') throw new MarkingSyntaxError('empty compartment name');
      if (!COMPARTMENT.test(c)) throw new MarkingSyntaxError(`compartment "${c}" is not letters, digits, underscore, hyphen or dot`);
      if (!compartments.includes(c)) compartments.push(c);
    }
    compartments.sort();
  }
  const level = levels[rank];
  return { level, rank, compartments, canonical: compartments.length ? `${level}//${compartments.join('/')}` : level };
}

/** Whether a marking could name this compartment (X-Classification's syntax). */
export function isCompartmentName(c: string): boolean {
  return COMPARTMENT.test(norm(c));
}

export function normalizeCompartment(c: string): string {
  return norm(c);
}

/**
 * Why `who` (with `clearance` and `compartments`) may not make a request under
 * `marking`, or null when it may. The messages are the spec's 403 texts.
 */
export function clearanceFailure(
  who: { name: string; clearance?: string; compartments: string[] },
  marking: Marking,
  levels: string[],
): string | null {
  const held = who.clearance === undefined ? -1 : levelRank(levels, who.clearance);
  if (held < 0) return `${who.name} holds no clearance on this server`;
  if (marking.rank > held) return `${who.name} is cleared to ${levels[held]} and this request is ${marking.level}`;
  const have = new Set(who.compartments.map(norm));
  for (const c of marking.compartments) if (!have.has(c)) return `${who.name} is not read into ${c}`;
  return null;
}
