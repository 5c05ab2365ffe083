import { findJsonFault, nestingPastLimit } from '../../libs/http/src/json-syntax';

describe('findJsonFault', () => {
  it.each([
    ['not json', 1, "unexpected 'o', expected 'null'", ''],
    ['{"a": nul', 9, "unexpected end of input, expected 'null'", 'a'],
    ['?', 0, "unexpected '?', expected a value", ''],
    ['{"a":}', 5, "unexpected '}', expected a value", 'a'],
    ['{"messages":', 12, 'unexpected end of input, expected a value', 'messages'],
    ['{"messages": [}', 14, "unexpected '}', expected a value", 'messages[0]'],
    ['{"messages":[{"role":"user","content":"hi"},{"role" "x"}]}', 52, "unexpected '\"', expected ':'", 'messages[1].role'],
    ['{"a":1 "b":2}', 7, "unexpected '\"', expected ',' or '}'", 'a'],
    ['{a:1}', 1, "unexpected 'a', expected a property name in double quotes", ''],
    ['[1,2,]', 5, "unexpected ']', expected a value", '[2]'],
    ['{"n":01}', 6, 'bad number', 'n'],
    ['{"n":1.}', 6, 'bad number', 'n'],
    ['{"n":-}', 5, 'bad number', 'n'],
    ['{"s":"a\\qb"}', 7, 'bad escape \\q in a string', 's'],
    ['{"s":"\\u12g4"}', 6, 'bad \\u escape in a string', 's'],
    ['{"s":"a\nb"}', 7, 'unescaped control character U+000A in a string', 's'],
    ['{"s":"abc', 9, 'unexpected end of input inside a string', 's'],
    ['{} x', 3, "unexpected 'x' after the JSON value", ''],
    ['tru', 3, "unexpected end of input, expected 'true'", ''],
    ['\ufeff{}', 0, "unexpected '\ufeff', expected a value", ''],
  ])('%j: offset %d, %s, in %j', (text, offset, reason, path) => {
    expect(() => JSON.parse(text)).toThrow();
    expect(findJsonFault(text)).toEqual({ offset, reason, path });
  });

  it('agrees with JSON.parse on valid bodies and on every truncation and one-character edit of them', () => {
    const bodies = [
      { model: '', messages: [{ role: 'user', content: 'Once "upon" a \\ time\n\u00e9\ud83d\ude00' }], max_tokens: 12, temperature: 0.5e-3, stop: ['\n', 'x'], n: null, stream: true },
      [1, -2.5, 3e10, 0, -0, true, false, null, [], {}, [[[]]], { a: { b: { c: [1, { d: 'e' }] } } }],
      'just a string',
      -12.75e-2,
    ];
    const edits = ['', '"', '{', '}', '[', ']', ',', ':', '0', '-', '.', 'e', '\\', ' ', 'x', '\n'];
    let checked = 0;
    for (const body of bodies) {
      for (const text of [JSON.stringify(body), JSON.stringify(body, null, 2)]) {
        expect(findJsonFault(text)).toBeNull();
        for (let at = 0; at < text.length; at++) {
          const variants = [text.slice(0, at), ...edits.map((e) => text.slice(0, at) + e + text.slice(at + 1))];
          for (const v of variants) {
            let valid = true;
            try {
              JSON.parse(v);
            } catch {
              valid = false;
            }
            if (v.trim() === '') continue;
            const f = findJsonFault(v);
            if (valid !== (f === null)) throw new Error(`disagrees with JSON.parse on ${JSON.stringify(v)}: ${JSON.stringify(f)}`);
            if (f) expect(f.offset).toBeLessThanOrEqual(v.length);
            checked++;
          }
        }
      }
    }
    expect(checked).toBeGreaterThan(5000);
  });

  it('does not recurse: a body nested 100000 levels deep is scanned', () => {
    const text = '['.repeat(100_000) + '1' + ']'.repeat(99_999);
    expect(findJsonFault(text)).toEqual({ offset: text.length, reason: "unexpected end of input, expected ',' or ']'", path: '[0]' });
    // An error deep inside: the path keeps its innermost part.
    const f = findJsonFault('{"a":'.repeat(100_000) + '}');
    expect(f?.offset).toBe(500_000);
    expect(f?.path).toBe('…' + '.a'.repeat(100));
  });
});

describe('nestingPastLimit', () => {
  it('finds the bracket that opens the level past the limit, ignoring brackets in strings', () => {
    const wrap = (depth: number, inner = '1') => '{"x":'.repeat(depth) + inner + '}'.repeat(depth);
    expect(nestingPastLimit(wrap(256), 256)).toBe(-1);
    const deep = wrap(257);
    expect(nestingPastLimit(deep, 256)).toBe(5 * 256);
    expect(deep[5 * 256]).toBe('{');
    const quoted = JSON.stringify({ s: '['.repeat(1000) + '{'.repeat(1000), t: ['a"]'] });
    expect(nestingPastLimit(quoted, 256)).toBe(-1);
    const escaped = JSON.stringify({ s: '\\"' + '['.repeat(600) });
    expect(nestingPastLimit(escaped, 256)).toBe(-1);
    // Many brackets, none deep: a long conversation.
    const wide = JSON.stringify({ messages: Array.from({ length: 2000 }, () => ({ role: 'user', content: [{ type: 'text', text: 'x' }] })) });
    expect(nestingPastLimit(wide, 256)).toBe(-1);
  });
});
