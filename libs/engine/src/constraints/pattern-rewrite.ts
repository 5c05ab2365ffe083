/**
 * A JSON schema's `pattern` (an ECMA-262 regular expression) in the subset llama.cpp's
 * schema converter follows. The converter reads only anchored patterns (`^…$`), none of the
 * class escapes (`\d`, `\w`, `\s`) and no escaped punctuation but its own few: anything else
 * it logged to stderr and dropped ("accepting any string"), so `^\d{5}$` let the model write
 * any string under a 200. The rewrite keeps to the pattern's language: `\d` is `[0-9]`, an
 * escaped `-` is `\x2D`; an unanchored pattern (a match anywhere, as JSON Schema reads it)
 * gets `.*` where its anchors are missing. Assertions (lookarounds, `\b`) are left out: the
 * grammar holds the rest, they go unchecked. What has no grammar form at all (back-references,
 * `\p{…}`, `\S` inside a class) is a problem.
 *
 * The grammar writes the pattern's characters into a JSON string as they are, so a control
 * character, `"` or `\` it let through made the answer no JSON: `.`, `\s` and every negated
 * class leave them out (a narrower language: what the grammar writes still matches).
 */
export type RewrittenPattern = { pattern: string } | { problem: string };

/** What no JSON string holds raw (as class members, in the escapes llama.cpp reads). */
const NOT_IN_JSON = '"\\\\\\x00-\\x1F';
/** `.`: any character but a line terminator, nor what no JSON string holds raw. */
const DOT = `[^${NOT_IN_JSON}\\u2028\\u2029]`;
/** ECMA-262's white space that a JSON string holds raw (its line ends and tabs need escapes). */
const SPACE = ' \\xA0\\u1680\\u2000-\\u200A\\u202F\\u205F\\u3000\\uFEFF';
/** And all of it, for what a negated class leaves out. */
const ALL_SPACE = `${SPACE}\\u2028\\u2029`;
const DIGIT = '0-9';
const WORD = '0-9A-Za-z_';
/** Escapes llama.cpp reads as they are. */
const KEPT = new Set(['t', 'n', 'r', '\\', '"', '[', ']']);
/** Escaped characters llama.cpp reads as literals outside a class. */
const LITERAL_OUTSIDE = new Set(['^', '$', '.', '[', ']', '(', ')', '|', '{', '}', '*', '+', '?']);
const QUANTIFIER = new Set(['*', '+', '?', '{']);

export function rewritePattern(source: string): RewrittenPattern {
  const alternatives = topLevelAlternatives(source);
  if (!alternatives) return { problem: 'its parentheses or brackets do not balance' };
  // Each alternative anchors itself (`^\d{5}$|^\d{5}-\d{4}$`): `.*` where its own anchor is missing.
  const pieces: string[] = [];
  for (const alt of alternatives) {
    const start = alt.startsWith('^');
    const end = endsWithAnchor(alt);
    const body = rewriteBody(alt.slice(start ? 1 : 0, end ? alt.length - 1 : alt.length));
    if ('problem' in body) return body;
    pieces.push(`${start ? '' : `${DOT}*`}${start && end ? body.pattern : `(?:${body.pattern})`}${end ? '' : `${DOT}*`}`);
  }
  return { pattern: pieces.length === 1 ? `^${pieces[0]}$` : `^(?:${pieces.join('|')})$` };
}

/** The pattern split at its `|` outside groups and classes; undefined when it does not balance. */
function topLevelAlternatives(src: string): string[] | undefined {
  const out: string[] = [];
  let depth = 0;
  let from = 0;
  for (let i = 0; i < src.length; i++) {
    const c = src[i];
    if (c === '\\') i++;
    else if (c === '[') {
      i = classEnd(src, i);
      if (i < 0) return undefined;
    } else if (c === '(') depth++;
    else if (c === ')' && --depth < 0) return undefined;
    else if (c === '|' && depth === 0) {
      out.push(src.slice(from, i));
      from = i + 1;
    }
  }
  if (depth !== 0) return undefined;
  out.push(src.slice(from));
  return out;
}

/** Whether the text ends with a `$` that is no escaped one. */
function endsWithAnchor(alt: string): boolean {
  if (!alt.endsWith('$')) return false;
  let slashes = 0;
  for (let i = alt.length - 2; i >= 0 && alt[i] === '\\'; i--) slashes++;
  return slashes % 2 === 0;
}

/** The index of the `]` closing the class opened at `at`, or -1 (ECMA-262: `[]` and `[^]` close at once). */
function classEnd(src: string, at: number): number {
  let i = at + 1;
  if (src[i] === '^') i++;
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
  // After a quantifier a `?` only makes it lazy, the same language; llama.cpp read `+?` as `(…+)?`.
  let quantified = false;
  for (let i = 0; i < src.length; i++) {
    const c = src[i];
    if (c === '?' && quantified) {
      quantified = false;
      continue;
    }
    quantified = QUANTIFIER.has(c) && c !== '{';
    if (c === '\\') {
      const e = escapeOutside(src, i);
      if ('problem' in e) return e;
      out += e.text;
      i += e.length - 1;
    } else if (c === '[') {
      const end = classEnd(src, i);
      const cls = rewriteClass(src.slice(i + 1, end));
      if ('problem' in cls) return cls;
      out += cls.pattern;
      i = end;
    } else if (c === '{') {
      const close = src.indexOf('}', i);
      if (close < 0) return { problem: 'a brace is not closed' };
      out += src.slice(i, close + 1);
      i = close;
      quantified = true;
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
      return { problem: 'an anchor inside a group has no grammar form' };
    } else if (c === '.') {
      out += DOT;
    } else {
      out += c;
    }
  }
  return { pattern: out };
}

/**
 * An escape outside a class, as llama.cpp reads it. A literal one goes in a group of its own:
 * llama.cpp joins an escape to the literal text before it, and a quantifier after it then took
 * the whole run (`ab\/?` was `(ab/)?`).
 */
function escapeOutside(src: string, at: number): { text: string; length: number } | { problem: string } {
  const n = src[at + 1];
  if (n === undefined) return { problem: 'it ends with a lone backslash' };
  switch (n) {
    case 'd':
      return { text: `[${DIGIT}]`, length: 2 };
    case 'D':
      return { text: `[^${DIGIT}${NOT_IN_JSON}]`, length: 2 };
    case 'w':
      return { text: `[${WORD}]`, length: 2 };
    case 'W':
      return { text: `[^${WORD}${NOT_IN_JSON}]`, length: 2 };
    case 's':
      return { text: `[${SPACE}]`, length: 2 };
    case 'S':
      return { text: `[^${ALL_SPACE}${NOT_IN_JSON}]`, length: 2 };
    case 'b':
    case 'B':
      // A word boundary only asserts: left out, as a lookaround is.
      return { text: '', length: 2 };
  }
  const e = LITERAL_OUTSIDE.has(n) ? { text: `\\${n}`, length: 2 } : shared(src, at);
  return 'problem' in e ? e : { text: `(?:${e.text})`, length: e.length };
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
  if (/[A-Za-z]/.test(n)) return { problem: `the escape \\${n} is not one a grammar can read` };
  // An identity escape of punctuation: the character itself, as a hex escape.
  const code = src.codePointAt(at + 1)!;
  if (code > 0xffff) return { text: String.fromCodePoint(code), length: 3 };
  return { text: code < 0x100 ? `\\x${hex(code, 2)}` : `\\u${hex(code, 4)}`, length: 2 };
}

/** A class's members (between its brackets), as a class llama.cpp reads. */
function rewriteClass(body: string): RewrittenPattern {
  if (body === '') return { problem: 'an empty class ([]) matches nothing' };
  if (body === '^') return { pattern: DOT.replace('\\u2028\\u2029', '') }; // [^]: any character
  const negated = body[0] === '^';
  // Left out of a negated class first: after a member that ends in `-` they would make a range.
  let out = negated ? `^${NOT_IN_JSON}\\u2028\\u2029` : '';
  for (let i = negated ? 1 : 0; i < body.length; i++) {
    const c = body[i];
    if (c !== '\\') {
      out += c === '[' ? '\\[' : c === '^' ? '\\x5E' : c;
      continue;
    }
    const n = body[i + 1];
    let text: string;
    if (n === 'd') text = DIGIT;
    else if (n === 'w') text = WORD;
    else if (n === 's') text = negated ? ALL_SPACE : SPACE;
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
  return { pattern: `[${out}]` };
}

function hex(n: number, width: number): string {
  return n.toString(16).toUpperCase().padStart(width, '0');
}
