import { MAX_NULLABLE_RUN, patternProblem } from '../../libs/engine/src/constraints/pattern-check';
import { schemaProblem } from '../../libs/engine/src/constraints/schema-check';

describe('patterns llama.cpp cannot follow in time', () => {
  it('refuses long runs of copies that can match nothing', () => {
    for (const p of ['^(b|c)*{100}$', '^((b|c)?){100}$', '^((b?){10}){10}$', '^(a|b?){40}$', `^${'a?'.repeat(9)}$`, '^(foo|)*{40}$', '(?:x*){9}', '^(b|c)*{9,}$', '^(b|c)*{,100}$', '^(b|c)*{ 100}$', '^(b|c)*{0, 100}$', `^${'(b|c|)'.repeat(60)}$`, '^(b|c)*{16}$']) {
      expect([p, patternProblem(p)]).toEqual([p, expect.stringContaining('repeats an expression that can match nothing')]);
    }
    expect(patternProblem('^(b|c)*{100}$')).toBe(
      `pattern "^(b|c)*{100}$" repeats an expression that can match nothing 100 times in a row; llama.cpp's grammar would try every way to split the text among them (at most ${MAX_NULLABLE_RUN} are allowed)`,
    );
  });

  it('lets ordinary patterns through', () => {
    for (const p of ['^((b|c)*){8}$', '^(b|c){0,200}$', '^[bc]*[bc]*$', '^(\\d{1,3}\\.){3}\\d{1,3}$', '^\\w+@\\w+\\.\\w+$', '^[a-z]{2,40}$', '^(?:x?)*$', '[(]{100}', '\\({50}', '^a{500}$', `^${'a?'.repeat(8)}$`, '^[^]]*$', '(?<name>ab)+', '^(\\+\\d{1,3})?\\s?\\(?\\d{3}\\)?[\\s.-]?\\d{3}[\\s.-]?\\d{4}$', '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$', '^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2}(:\\d{2}(\\.\\d+)?)?)?$', '^\\d{1,3}(,\\d{3})*(\\.\\d+)?$']) {
      expect([p, patternProblem(p)]).toEqual([p, undefined]);
    }
  });

  it('refuses what is no ECMA-262 regular expression (llama.cpp read "^(a" as something, and the answer ignored it)', () => {
    for (const [p, why] of [['^(a', 'Unterminated group'], ['unclosed(', 'Unterminated group'], ['[a-', 'Unterminated character class'], ['a{2,1}', 'numbers out of order in {} quantifier'], ['^(b|c)*{8}$', 'Nothing to repeat']]) {
      expect(patternProblem(p)).toBe(`pattern ${JSON.stringify(p)} is not a valid regular expression (${why})`);
    }
  });

  it('is found anywhere in a schema', () => {
    const schema = { type: 'object', properties: { code: { type: 'array', items: { type: 'string', pattern: '^(b|c)*{100}$' } } } };
    expect(schemaProblem(schema)).toMatch(/^properties\.code\.items: pattern "\^\(b\|c\)\*\{100\}\$" repeats/);
  });
});
