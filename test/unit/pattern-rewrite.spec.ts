import { rewritePattern } from '../../libs/engine/src/constraints/pattern-rewrite';
import { enforceableSchema } from '../../libs/engine/src/constraints/schema-rewrite';

const rewritten = (p: string): string => {
  const r = rewritePattern(p);
  if (!('pattern' in r)) throw new Error(r.problem);
  return r.pattern;
};

/** What the grammar writes between a JSON string's quotes, as text (no control characters, quotes or backslashes). */
const NOT_JSON = '"\\\\\\x00-\\x1F';
const DOT = `[^${NOT_JSON}\\u2028\\u2029]`;

/** What the grammar lets through must match the caller's pattern: each sample agrees where the rewrite accepts it. */
function expectSound(p: string, samples: string[]): void {
  const mine = new RegExp(rewritten(p));
  const theirs = new RegExp(p);
  for (const s of samples) if (mine.test(s)) expect([p, s, theirs.test(s)]).toEqual([p, s, true]);
}

describe('rewritePattern (a schema pattern in the subset llama.cpp enforces)', () => {
  it('writes the class escapes out, keeps anchored patterns anchored', () => {
    expect(rewritten('^\\d{5}$')).toBe('^[0-9]{5}$');
    expect(rewritten('^\\w+\\s\\D$')).toBe(`^[0-9A-Za-z_]+[ \\xA0\\u1680\\u2000-\\u200A\\u202F\\u205F\\u3000\\uFEFF][^0-9${NOT_JSON}]$`);
    expect(rewritten('^[a-z\\-\\.]+$')).toBe('^[a-z\\x2D\\x2E]+$');
    // A literal escape in a group of its own: llama.cpp joined it to the text before, and `?` took the run.
    expect(rewritten('^a\\/b\\:c\\.d$')).toBe('^a(?:\\x2F)b(?:\\x3A)c(?:\\.)d$');
    expect(rewritten('^ab\\/?$')).toBe('^ab(?:\\x2F)?$');
    // Lazy quantifiers match the same strings; llama.cpp read `+?` as `(…+)?`.
    expect(rewritten('^x\\d+?y*?z{1,2}?$')).toBe('^x[0-9]+y*z{1,2}$');
  });

  it('. and negated classes never write what a JSON string cannot hold raw', () => {
    expect(rewritten('^a.b$')).toBe(`^a${DOT}b$`);
    expect(rewritten('^[^a-]$')).toBe(`^[^${NOT_JSON}\\u2028\\u2029a-]$`);
    expect(rewritten('^[^]$')).toBe(`^[^${NOT_JSON}]$`);
    for (const p of ['^\\S+$', '^.+$', '[a-z]', '^[^x]+$', '^\\D+$', '^\\W+$', '^[^\\s]+$', '^\\s+$']) {
      for (const bad of ['"', '\\', '\n', '\t', '\u0001']) expect([p, JSON.stringify(bad), new RegExp(rewritten(p)).test(`a${bad}b`)]).toEqual([p, JSON.stringify(bad), false]);
    }
  });

  it('an alternative without its anchor matches anywhere (JSON Schema): .* where an anchor is missing', () => {
    expect(rewritten('[a-z]+')).toBe(`^${DOT}*(?:[a-z]+)${DOT}*$`);
    expect(rewritten('^ab')).toBe(`^(?:ab)${DOT}*$`);
    expect(rewritten('ab$')).toBe(`^${DOT}*(?:ab)$`);
    expect(rewritten('^\\d{5}$|^\\d{5}-\\d{4}$')).toBe('^(?:[0-9]{5}|[0-9]{5}-[0-9]{4})$');
    expect(rewritten('^a|b$')).toBe(`^(?:(?:a)${DOT}*|${DOT}*(?:b))$`);
  });

  it('assertions are left out; named groups are plain groups', () => {
    expect(rewritten('^(?!\\.)(?!.*\\.\\.)[A-Za-z.]+$')).toBe('^[A-Za-z.]+$');
    expect(rewritten('^\\bfoo\\b$')).toBe('^foo$');
    expect(rewritten('^(?<year>\\d{4})-(?<m>\\d{2})$')).toBe('^([0-9]{4})-([0-9]{2})$');
  });

  it('what has no grammar form is named', () => {
    for (const [p, why] of [
      ['^(a)\\1$', /back-reference/],
      ['^\\p{L}+$', /property/],
      ['^[\\S]$', /inside a character class/],
      ['^(a$|b)$', /anchor inside a group/],
      ['^(?i)a$', /inline flags/],
      ['^(a$', /balance/],
      ['^[]$', /empty class/],
    ] as const) {
      const r = rewritePattern(p);
      expect([p, 'problem' in r && r.problem]).toEqual([p, expect.stringMatching(why)]);
    }
  });

  it('is sound: what the rewrite accepts, the pattern accepts', () => {
    const samples = ['a"b', 'a\\b', '"', 'x\\', '12345', '12345-6789', '1234', 'a-b.c@d.e', 'x y', 'abc', 'ab', 'ab/', 'a', 'b', 'ba', '', ' ', '\u00a0', 'Ab_9', 'a.b', '.ab', 'a..b', 'foo', 'xfoo', 'a/b:c.d', 'x1', 'x12y', 'x1yz'];
    // (Not the assertions, which are left out unchecked: documented.)
    const patterns = ['^\\d{5}$', '[a-z]+', '^ab', 'ab$', '^a|b$', '^\\d{5}$|^\\d{5}-\\d{4}$', '^[a-z\\-\\.]+@[^@\\s]+$', '^\\w+$', '^\\S+$', '\\s', '^a\\/b\\:c\\.d$', '^a.b$', '^[^a-]+$', '^ab\\/?$', '^x\\d+?y*?z{0,2}?$'];
    for (const p of patterns) expectSound(p, samples);
  });
});

describe('enforceableSchema', () => {
  it('rewrites patterns at any depth and gives a lone integer minimum an upper bound', () => {
    const schema = {
      type: 'object',
      properties: {
        zip: { type: 'string', pattern: '^\\d{5}$' },
        n: { type: 'integer', minimum: 100 },
        opt: { type: ['integer', 'null'], minimum: 500 },
        list: { type: 'array', items: { type: 'integer', exclusiveMinimum: 9 } },
        huge: { type: 'integer', minimum: 1e17 },
        x: { type: 'number', minimum: 1 },
      },
    };
    const max = Number.MAX_SAFE_INTEGER;
    expect(enforceableSchema(schema, true)).toEqual({
      type: 'object',
      properties: {
        zip: { type: 'string', pattern: '^[0-9]{5}$' },
        n: { type: 'integer', minimum: 100, maximum: max },
        opt: { type: ['integer', 'null'], minimum: 500, maximum: max },
        list: { type: 'array', items: { type: 'integer', exclusiveMinimum: 9, maximum: max } },
        // Past the bound: left as it was (a maximum below it would refuse a valid schema).
        huge: { type: 'integer', minimum: 1e17 },
        x: { type: 'number', minimum: 1 },
      },
    });
    expect(schema.properties.zip.pattern).toBe('^\\d{5}$'); // the caller's object is left as it was
  });

  it('a pattern with no grammar form: a refusal for an answer format, left as it was for a tool', () => {
    const schema = { type: 'object', properties: { name: { type: 'string', pattern: '^\\p{L}+$' } } };
    expect(() => enforceableSchema(schema, true)).toThrow('properties.name: pattern "^\\\\p{L}+$" cannot be enforced while sampling: Unicode property classes (\\p{…}) have no grammar form here');
    expect(enforceableSchema(schema, false)).toEqual(schema);
  });
});
