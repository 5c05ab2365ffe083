import { patternProblem } from './pattern-check';

/**
 * JSON schemas that no value satisfies, or that llama.cpp's grammar cannot enforce at all,
 * found before the schema becomes a grammar. Through llama.cpp's converter a length or count
 * range with its minimum above its maximum either hung the grammar parser (a string's length:
 * native/src/sampler.cpp refuses that too) or was dropped (an array's item count), an empty
 * enum let the model stop at once with "", and `not` was ignored: each answered 200 with output
 * the schema forbids, where the spec says the schema is enforced during sampling.
 */
export function schemaProblem(schema: unknown, opts: { ecmaPatterns?: boolean } = {}): string | undefined {
  return walk(schema, '', 0, opts.ecmaPatterns ?? true);
}

const RANGES: Array<[string, string]> = [
  ['minLength', 'maxLength'],
  ['minItems', 'maxItems'],
  ['minProperties', 'maxProperties'],
  ['minContains', 'maxContains'],
  ['minimum', 'maximum'],
];

/** Keywords whose value is a schema, or a map or list of schemas. */
export const ONE = ['additionalProperties', 'items', 'contains', 'propertyNames', 'additionalItems', 'unevaluatedItems', 'unevaluatedProperties'];
export const MAP = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];
export const LIST = ['anyOf', 'oneOf', 'allOf', 'prefixItems', 'items'];

/** Past this depth a schema is left to llama.cpp (its converter has its own limits). */
export const MAX_DEPTH = 64;

function walk(node: unknown, at: string, depth: number, ecma: boolean): string | undefined {
  if (!node || typeof node !== 'object' || Array.isArray(node) || depth > MAX_DEPTH) return undefined;
  const s = node as Record<string, unknown>;
  const where = at ? `${at}: ` : '';
  const own = keywordProblem(s, where);
  if (own) return own;
  const pattern = typeof s.pattern === 'string' ? patternProblem(s.pattern, ecma) : undefined;
  if (pattern) return `${where}${pattern}`;
  for (const k of ONE) {
    const p = walk(s[k], join(at, k), depth + 1, ecma);
    if (p) return p;
  }
  for (const k of MAP) {
    const m = s[k];
    if (!m || typeof m !== 'object' || Array.isArray(m)) continue;
    for (const [name, sub] of Object.entries(m)) {
      const p = walk(sub, join(at, `${k}.${name}`), depth + 1, ecma);
      if (p) return p;
    }
  }
  for (const k of LIST) {
    const list = s[k];
    if (!Array.isArray(list)) continue;
    for (let i = 0; i < list.length; i++) {
      const p = walk(list[i], join(at, `${k}[${i}]`), depth + 1, ecma);
      if (p) return p;
    }
  }
  return undefined;
}

/** Keywords of one schema node that no value satisfies, or that the grammar cannot hold. */
function keywordProblem(s: Record<string, unknown>, where: string): string | undefined {
  for (const [lo, hi] of RANGES) {
    if (typeof s[lo] === 'number' && typeof s[hi] === 'number' && (s[lo] as number) > (s[hi] as number)) {
      return `${where}${lo} ${s[lo]} is above ${hi} ${s[hi]}, which no value satisfies`;
    }
  }
  const xmin = s.exclusiveMinimum;
  const xmax = s.exclusiveMaximum;
  if (typeof xmin === 'number' && typeof xmax === 'number' && xmin >= xmax) {
    return `${where}exclusiveMinimum ${xmin} is not below exclusiveMaximum ${xmax}, which no value satisfies`;
  }
  if (Array.isArray(s.enum) && s.enum.length === 0) return `${where}enum lists no value, which no value satisfies`;
  if ('not' in s) return `${where}the keyword "not" is not supported: a grammar cannot exclude what a schema matches`;
  return undefined;
}

export function join(at: string, key: string): string {
  return at ? `${at}.${key}` : key;
}
