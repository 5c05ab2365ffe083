import { InvalidRequestError } from '../core/errors';
import { rewritePattern } from './pattern-rewrite';
import { join, LIST, MAP, MAX_DEPTH, ONE } from './schema-check';

/**
 * A JSON schema as llama.cpp's converter can enforce it, the same values allowed: patterns in
 * its subset (pattern-rewrite.ts), and an integer's lone lower bound given an upper one. Its
 * builder for a minimum alone drops the zeros after the first digit (minimum 100 let "11"
 * through, 1e9 let "11"), where a range with both bounds is right. The bound is 2^53 - 1, the
 * largest integer a client parsing JSON numbers as doubles reads exactly. `refuse`: a pattern with no grammar form is a 400 (an answer's format);
 * otherwise (a tool's parameters, whose authors may write Python's syntax) it goes as it was,
 * and llama.cpp accepts any string there, as before.
 */
export function enforceableSchema(schema: unknown, refuse: boolean): unknown {
  return rewrite(schema, '', 0, refuse);
}

/** The largest integer a client parsing JSON numbers as doubles reads exactly. */
const INTEGER_CEILING = Number.MAX_SAFE_INTEGER;

function rewrite(node: unknown, at: string, depth: number, refuse: boolean): unknown {
  if (!node || typeof node !== 'object' || Array.isArray(node) || depth > MAX_DEPTH) return node;
  const s: Record<string, unknown> = { ...(node as Record<string, unknown>) };
  if (typeof s.pattern === 'string') {
    const r = rewritePattern(s.pattern);
    if ('pattern' in r) s.pattern = r.pattern;
    else if (refuse) throw new InvalidRequestError(`${at ? `${at}: ` : ''}pattern ${JSON.stringify(s.pattern)} cannot be enforced while sampling: ${r.problem}`);
  }
  const lower = Math.max(typeof s.minimum === 'number' ? s.minimum : -Infinity, typeof s.exclusiveMinimum === 'number' ? s.exclusiveMinimum + 1 : -Infinity);
  const upper = typeof s.maximum === 'number' || typeof s.exclusiveMaximum === 'number';
  const integer = s.type === 'integer' || (Array.isArray(s.type) && s.type.includes('integer'));
  // Past the ceiling the minimum stays alone: a maximum below it would refuse a valid schema.
  if (integer && lower > -Infinity && lower < INTEGER_CEILING && !upper) s.maximum = INTEGER_CEILING;
  for (const k of ONE) if (k in s) s[k] = rewrite(s[k], join(at, k), depth + 1, refuse);
  for (const k of MAP) {
    const m = s[k];
    if (!m || typeof m !== 'object' || Array.isArray(m)) continue;
    s[k] = Object.fromEntries(Object.entries(m).map(([name, sub]) => [name, rewrite(sub, join(at, `${k}.${name}`), depth + 1, refuse)]));
  }
  for (const k of LIST) if (Array.isArray(s[k])) s[k] = (s[k] as unknown[]).map((sub, i) => rewrite(sub, join(at, `${k}[${i}]`), depth + 1, refuse));
  return s;
}
