import { rewritePattern } from '../../libs/engine/src/constraints/pattern-rewrite';
import { enforceableSchema } from '../../libs/engine/src/constraints/schema-rewrite';

const rewritten = (p: string): string => {
  const r = rewritePattern(p);
  if (!('pattern' in r)) throw new Error(r.problem);
  return r.pattern;
};

/** What the grammar lets through must match the caller's pattern: each sample agrees where the rewrite accepts it. */
function expectSound(p: string, samples: string[]): void {
  const mine = new RegExp(rewritten(p));
  const theirs = new RegExp(p);
  for (const s of samples) if (mine.test(s)) expect([p, s, theirs.test(s)]).toEqual([p, s, true]);
}

describe('rewritePattern (a schema pattern in the subset llama.cpp enforces)', () => {
  it('writes the class escapes out, keeps anchored patterns anchored', () => {
    expect(rewritten('^\\d{5}$')).toBe('^[0-9]{5}$');
    expect(rewritten('^\\w+\\s\\D$')).toBe('^[0-9A-Za-z_]+[\\t\\n\\x0B\\x0C\\r \\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000\\uFEFF][^0-9"\\\\]$');
    // Negated classes and . never write " or \ (the text sits in a JSON string as it is).
    expect(rewritten('^[a-z\\-\\.]+@[^@\\s]+$')).toBe('^[a-z\\x2D\\x2E]+@[^"\\\\@\\t\\n\\x0B\\x0C\\r \\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000\\uFEFF]+$');
    expect(rewritten('^a.b$')).toBe('^a[^"\\\\\\n\\r]b$');
    expect(rewritten('^a\\/b\\:c\\.d$')).toBe('^a\\x2Fb\\x3Ac\\.d$');
  });

  it('an unanchored pattern matches anywhere (JSON Schema): .* where an anchor is missing', () => {
    const any = '[^"\\\\\\n\\r]*';
    expect(rewritten('[a-z]+')).toBe(`^${any}(?:[a-z]+)${any}$`);
    expect(rewritten('^ab')).toBe(`^(?:ab)${any}$`);
    expect(rewritten('ab$')).toBe(`^${any}(?:ab)$`);
    expect(rewritten('^a|b$')).toBe('^a|b$');
  });

  it('assertions are left out; named groups are plain groups', () => {
    expect(rewritten('^(?!\\.)(?!.*\\.\\.)[A-Za-z.]+$')).toBe('^[A-Za-z.]+$');
    expect(rewritten('^[^a-]$')).toBe('^[^"\\\\a-]$');
    expect(rewritten('^\\bfoo\\b$')).toBe('^foo$');
    expect(rewritten('^(?<year>\\d{4})-(?<m>\\d{2})$')).toBe('^([0-9]{4})-([0-9]{2})$');
  });

  it('what has no grammar form is named', () => {
    for (const [p, why] of [
      ['^(a)\\1$', /back-reference/],
      ['^\\p{L}+$', /property/],
      ['^[\\S]$', /inside a character class/],
      ['^a$b$', /anchor inside/],
      ['^(?i)a$', /inline flags/],
      ['^(a$', /balance/],
    ] as const) {
      const r = rewritePattern(p);
      expect([p, 'problem' in r && r.problem]).toEqual([p, expect.stringMatching(why)]);
    }
  });

  it('is sound: what the rewrite accepts, the pattern accepts', () => {
    const samples = ['a"b', 'a\\b', '"', 'x\\', '12345', '1234', 'a-b.c@d.e', 'x y', 'abc', 'ab', 'a', '', ' ', '\u00a0', 'Ab_9', 'a.b', '.ab', 'a..b', 'foo', 'xfoo', 'a/b:c.d'];
    // (Not the assertions, which are left out unchecked: documented.)
    for (const p of ['^\\d{5}$', '[a-z]+', '^ab', 'ab$', '^a|b$', '^[a-z\\-\\.]+@[^@\\s]+$', '^\\w+$', '^\\S+$', '\\s', '^a\\/b\\:c\\.d$', '^a.b$', '^[^a-]+$']) expectSound(p, samples);
    // Nor do they write a quote or a backslash where the caller's pattern allowed any character.
    for (const p of ['^\\S+$', '^.+$', '[a-z]', '^[^x]+$', '^\\D+$']) for (const bad of ['"', '\\']) expect([p, new RegExp(rewritten(p)).test(`a${bad}b`)]).toEqual([p, false]);
  });
});

describe('enforceableSchema', () => {
  it('rewrites patterns at any depth and gives a lone integer minimum an upper bound', () => {
    const schema = { type: 'object', properties: { zip: { type: 'string', pattern: '^\\d{5}$' }, n: { type: 'integer', minimum: 100 }, list: { type: 'array', items: { type: 'integer', exclusiveMinimum: 9 } }, x: { type: 'number', minimum: 1 } } };
    expect(enforceableSchema(schema, true)).toEqual({
      type: 'object',
      properties: {
        zip: { type: 'string', pattern: '^[0-9]{5}$' },
        n: { type: 'integer', minimum: 100, maximum: 9999999999999999 },
        list: { type: 'array', items: { type: 'integer', exclusiveMinimum: 9, maximum: 9999999999999999 } },
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
