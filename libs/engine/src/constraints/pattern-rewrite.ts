/**
 * A JSON schema's `pattern` (an ECMA-262 regular expression) in the subset llama.cpp's
 * schema converter follows. The converter reads only anchored patterns (`^…$`), none of the
 * class escapes (`\d`, `\w`, `\s`) and no escaped punctuation but its own few: anything else
 * it logged to stderr and dropped ("accepting any string"), so `^\d{5}$` let the model write
 * any string under a 200. The rewrite keeps the language: `\d` is `[0-9]`, `\s` every
 * whitespace character ECMA-262 names, an escaped `-` is `\x2D`; an unanchored pattern (a
 * match anywhere, as JSON Schema reads it) gets `.*` where its anchors are missing. Assertions
 * (lookarounds, `\b`) are left out: the grammar holds the rest, they go unchecked. What has no
 * grammar form at all (back-references, `\p{…}`, `\S` inside a class) is a problem.
 */
export type RewrittenPattern = { pattern: string } | { problem: string };

/** ECMA-262's WhiteSpace and LineTerminator characters, as class members llama.cpp reads. */
const SPACE = '\\t\\n\\x0B\\x0C\\r \\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000\\uFEFF';
const DIGIT = '0-9';
const WORD = '0-9A-Za-z_';
/**
 * The pattern's text goes into a JSON string as it is: a `"` or `\` the grammar let through
 * ended the string early or escaped the next character, and the answer was no JSON. `.` and every
 * negated class leave them out (a narrower language: what the grammar writes still matches).
 */
const DOT = '[^"\\\\\\n\\r]';
const NOT_JSON_SPECIAL = '"\\\\';
/** Escapes llama.cpp reads as they are (its own, and the hex forms). */
const KEPT = new Set(['t', 'n', 'r', '\\', '"', '[', ']']);
/** Escaped characters llama.cpp reads as literals outside a class. */
const LITERAL_OUTSIDE = new Set(['^', '$', '.', '[', ']', '(', ')', '|', '{', '}', '*', '+', '?']);

export function rewritePattern(source: string): RewrittenPattern {
  const top = topLevel(source);
  if (!top) return { problem: 'its parentheses or brackets do not balance' };
  const start = source.startsWith('^');
  const end = top.endAnchor;
  const body = source.slice(start ? 1 : 0, end ? source.length - 1 : source.length);
  const rewritten = rewriteBody(body);
  if ('problem' in rewritten) return rewritten;
  // Both anchors: the converter reads `^a|b$` as ^(a|b)$, a narrower language than ECMA-262's
  // (^a)|(b$), so whatever the grammar lets through still matches. Likewise `.*` added around.
  if (start && end) return { pattern: `^${rewritten.pattern}$` };
  return { pattern: `^${start ? '' : `${DOT}*`}(?:${rewritten.pattern})${end ? '' : `${DOT}*`}$` };
}

/** Whether the pattern's parentheses balance, and whether it ends with an unescaped `$`. */
function topLevel(src: string): { endAnchor: boolean } | undefined {
  let depth = 0;
  let endAnchor = false;
  for (let i = 0; i < src.length; i++) {
    const c = src[i];
    endAnchor = false;
    if (c === '\\') {
      i++;
    } else if (c === '[') {
      i = classEnd(src, i);
      if (i < 0) return undefined;
    } else if (c === '(') {
      depth++;
    } else if (c === ')') {
      if (--depth < 0) return undefined;
    } else if (c === '$' && depth === 0 && i === src.length - 1) {
      endAnchor = true;
    }
  }
  return depth === 0 ? { endAnchor } : undefined;
}

/** The index of the `]` closing the class opened at `at`, or -1. */
function classEnd(src: string, at: number): number {
  let i = at + 1;
  if (src[i] === '^') i++;
  if (src[i] === ']') i++; // a leading ] is a member in most dialects; ECMA-262 reads [] as empty, rare enough
  for (; i < src.length; i++) {
    if (src[i] === '\\') i++;
    else if (src[i] === ']') return i;
  }
  return -1;
}

/** The index of the `)` closing the group opened at `at`, or -1. */
function groupEnd(src: string, at: number): number {
  let depth = 0;
  for (let i = at; i < src.length; i++) {
    const c = src[i];
    if (c === '\\') i++;
    else if (c === '[') {
      i = classEnd(src, i);
      if (i < 0) return -1;
    } else if (c === '(') depth++;
    else if (c === ')' && --depth === 0) return i;
  }
  return -1;
}

function rewriteBody(src: string): RewrittenPattern {
  let out = '';
  for (let i = 0; i < src.length; i++) {
    const c = src[i];
    if (c === '\\') {
      const e = escapeOutside(src, i);
      if ('problem' in e) return e;
      out += e.text;
      i += e.length - 1;
    } else if (c === '[') {
      const end = classEnd(src, i);
      const cls = rewriteClass(src.slice(i + 1, end));
      if ('problem' in cls) return cls;
      out += `[${cls.pattern}]`;
      i = end;
    } else if (c === '(' && src[i + 1] === '?') {
      if (src[i + 2] === ':') {
        out += '(?:';
        i += 2;
      } else if (src[i + 2] === '<' && src[i + 3] !== '=' && src[i + 3] !== '!') {
        // A named group matches as a plain one.
        const close = src.indexOf('>', i);
        if (close < 0) return { problem: 'a named group is not closed' };
        out += '(';
        i = close;
      } else if (/^\(\?(=|!|<=|<!)/.test(src.slice(i, i + 4))) {
        // A lookaround only asserts: left out, the grammar still holds the rest of the pattern.
        const close = groupEnd(src, i);
        if (close < 0) return { problem: 'its parentheses do not balance' };
        i = close;
      } else {
        return { problem: 'inline flags have no grammar form' };
      }
    } else if (c === '^' || c === '$') {
      return { problem: 'an anchor inside the pattern has no grammar form' };
    } else if (c === '.') {
      out += DOT;
    } else {
      out += c;
    }
  }
  return { pattern: out };
}

function escapeOutside(src: string, at: number): { text: string; length: number } | { problem: string } {
  const n = src[at + 1];
  if (n === undefined) return { problem: 'it ends with a lone backslash' };
  switch (n) {
    case 'd':
      return { text: `[${DIGIT}]`, length: 2 };
    case 'D':
      return { text: `[^${DIGIT}${NOT_JSON_SPECIAL}]`, length: 2 };
    case 'w':
      return { text: `[${WORD}]`, length: 2 };
    case 'W':
      return { text: `[^${WORD}${NOT_JSON_SPECIAL}]`, length: 2 };
    case 's':
      return { text: `[${SPACE}]`, length: 2 };
    case 'S':
      return { text: `[^${SPACE}${NOT_JSON_SPECIAL}]`, length: 2 };
    case 'b':
    case 'B':
      // A word boundary only asserts: left out, as a lookaround is.
      return { text: '', length: 2 };
  }
  if (LITERAL_OUTSIDE.has(n)) return { text: `\\${n}`, length: 2 };
  return shared(src, at);
}

/** An escape read the same inside and outside a class. */
function shared(src: string, at: number): { text: string; length: number } | { problem: string } {
  const n = src[at + 1];
  if (KEPT.has(n)) return { text: `\\${n}`, length: 2 };
  if (n === 'x' && /^[0-9A-Fa-f]{2}$/.test(src.slice(at + 2, at + 4))) return { text: src.slice(at, at + 4), length: 4 };
  if (n === 'u' && /^[0-9A-Fa-f]{4}$/.test(src.slice(at + 2, at + 6))) return { text: src.slice(at, at + 6), length: 6 };
  if (n === 'v') return { text: '\\x0B', length: 2 };
  if (n === 'f') return { text: '\\x0C', length: 2 };
  if (n === '0' && !/[0-9]/.test(src[at + 2] ?? '')) return { text: '\\x00', length: 2 };
  if (/[0-9]/.test(n) || n === 'k') return { problem: 'a back-reference has no grammar form' };
  if (n === 'p' || n === 'P') return { problem: 'Unicode property classes (\\p{…}) have no grammar form here' };
  if (n === 'c' || n === 'u' || n === 'x') return { problem: `the escape \\${n} is not one a grammar can read` };
  // An identity escape of punctuation: the character itself, as a hex escape.
  if (/[A-Za-z]/.test(n)) return { problem: `the escape \\${n} is not one a grammar can read` };
  const code = src.codePointAt(at + 1)!;
  if (code > 0xffff) return { text: String.fromCodePoint(code), length: 3 };
  return { text: code < 0x100 ? `\\x${hex(code, 2)}` : `\\u${hex(code, 4)}`, length: 2 };
}

function rewriteClass(body: string): RewrittenPattern {
  let out = '';
  let i = 0;
  if (body[0] === '^') {
    // First: after a member that ends in `-`, they would make a range.
    out = `^${NOT_JSON_SPECIAL}`;
    i = 1;
  }
  for (; i < body.length; i++) {
    const c = body[i];
    if (c !== '\\') {
      // A leading ] (kept by classEnd) is a member; so are ^ and [ past the start.
      out += c === ']' || c === '[' ? `\\${c}` : c === '^' ? '\\x5E' : c;
      continue;
    }
    const n = body[i + 1];
    let text: string;
    if (n === 'd') text = DIGIT;
    else if (n === 'w') text = WORD;
    else if (n === 's') text = SPACE;
    else if (n === 'D' || n === 'W' || n === 'S') return { problem: `\\${n} inside a character class has no grammar form` };
    else if (n === 'b') text = '\\x08';
    else if (n === '-') text = '\\x2D';
    else {
      const e = shared(body, i);
      if ('problem' in e) return e;
      i += e.length - 1;
      out += e.text;
      continue;
    }
    out += text;
    i++;
  }
  return { pattern: out };
}

function hex(n: number, width: number): string {
  return n.toString(16).toUpperCase().padStart(width, '0');
}
