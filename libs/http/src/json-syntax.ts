/**
 * What V8 leaves out of a JSON.parse failure: where it is and in which field.
 * Its messages name an offset only for some faults ("Unexpected token 'o', "not
 * json" is not valid JSON" has none) and never the field, while the spec wants
 * both. Only run on bodies JSON.parse refused or that nest too deep, so the
 * request path never pays for it. Iterative: a deeply nested body cannot
 * overflow the stack here.
 */

/** Where a body stops being JSON: the offset (UTF-16 units, as JSON.parse counts), why, and the field. */
export interface JsonFault {
  offset: number;
  reason: string;
  path: string;
}

interface Frame {
  array: boolean;
  /** The array index or object key whose value is being read; null before an object's first key. */
  key: string | number | null;
}

const WS = new Set([0x20, 0x09, 0x0a, 0x0d]);
const ESCAPES = new Set('"\\/bfnrtu'.split(''));

/** The first syntax fault of `text`, or null where it is valid JSON. */
export function findJsonFault(text: string): JsonFault | null {
  const n = text.length;
  const stack: Frame[] = [];
  let i = 0;
  const fault = (offset: number, reason: string): JsonFault => ({ offset, reason, path: pathOf(stack) });
  const ws = () => {
    while (i < n && WS.has(text.charCodeAt(i))) i++;
  };
  const unexpected = (what: string): JsonFault =>
    i >= n ? fault(n, `unexpected end of input, expected ${what}`) : fault(i, `unexpected ${describeChar(text[i])}, expected ${what}`);

  type Step = 'value' | 'key' | 'after';
  let step: Step = 'value';
  for (;;) {
    ws();
    if (step === 'value') {
      const c = text[i];
      if (c === '{' || c === '[') {
        i++;
        ws();
        if (text[i] === (c === '{' ? '}' : ']')) {
          i++;
          step = 'after';
        } else {
          stack.push({ array: c === '[', key: c === '[' ? 0 : null });
          step = c === '[' ? 'value' : 'key';
        }
        continue;
      }
      const end = c === '"' ? stringEnd(text, i) : c === '-' || (c >= '0' && c <= '9') ? numberEnd(text, i) : literalEnd(text, i);
      if (typeof end !== 'number') return end === null ? unexpected('a value') : fault(end.offset, end.reason);
      i = end;
      step = 'after';
    } else if (step === 'key') {
      if (text[i] !== '"') return unexpected('a property name in double quotes');
      const end = stringEnd(text, i);
      if (typeof end !== 'number') return fault(end!.offset, end!.reason);
      stack[stack.length - 1].key = JSON.parse(text.slice(i, end)) as string;
      i = end;
      ws();
      if (text[i] !== ':') return unexpected("':'");
      i++;
      step = 'value';
    } else {
      const top = stack[stack.length - 1];
      if (!top) return i < n ? fault(i, `unexpected ${describeChar(text[i])} after the JSON value`) : null;
      const close = top.array ? ']' : '}';
      if (text[i] === ',') {
        i++;
        if (top.array) (top.key as number)++;
        step = top.array ? 'value' : 'key';
      } else if (text[i] === close) {
        i++;
        stack.pop();
      } else {
        return unexpected(`',' or '${close}'`);
      }
    }
  }
}

/**
 * The offset of the first '{' or '[' that opens a level deeper than `limit`, or -1.
 * For a body JSON.parse accepted: validation and transformation walk it recursively,
 * and a small body nested a few thousand levels would overflow their stack.
 */
export function nestingPastLimit(text: string, limit: number): number {
  // A body with fewer brackets than the limit cannot pass it: two native scans decide most bodies.
  if (text.length <= 2 * limit || countUpTo(text, '{', limit) + countUpTo(text, '[', limit) <= limit) return -1;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // skip the string, escapes included
      for (i++; i < text.length && text.charCodeAt(i) !== 0x22; i++) if (text.charCodeAt(i) === 0x5c) i++;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return i;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return -1;
}

function countUpTo(text: string, ch: string, limit: number): number {
  let count = 0;
  for (let at = text.indexOf(ch); at !== -1 && count <= limit; at = text.indexOf(ch, at + 1)) count++;
  return count;
}

type End = number | { offset: number; reason: string } | null;

function stringEnd(text: string, start: number): number | { offset: number; reason: string } {
  for (let j = start + 1; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (c === 0x22) return j + 1;
    if (c < 0x20) return { offset: j, reason: `unescaped control character U+${c.toString(16).padStart(4, '0').toUpperCase()} in a string` };
    if (c === 0x5c) {
      const e = text[j + 1];
      if (e === undefined) break;
      if (!ESCAPES.has(e)) return { offset: j, reason: `bad escape \\${e} in a string` };
      if (e === 'u' && !/^[0-9a-fA-F]{4}$/.test(text.slice(j + 2, j + 6))) return { offset: j, reason: 'bad \\u escape in a string' };
      j += e === 'u' ? 5 : 1;
    }
  }
  return { offset: text.length, reason: 'unexpected end of input inside a string' };
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

function numberEnd(text: string, start: number): End {
  NUMBER.lastIndex = start;
  const m = NUMBER.exec(text);
  if (!m) return { offset: start, reason: 'bad number' };
  const end = start + m[0].length;
  // "01", "1." and "1e" parse a prefix: the next character is the fault.
  return /[0-9.eE+-]/.test(text[end] ?? '') ? { offset: end, reason: 'bad number' } : end;
}

const LITERALS: Record<string, string> = { t: 'true', f: 'false', n: 'null' };

/** A literal ends where it stops matching its word: "nul" fails at the end, "not" at 'o'. */
function literalEnd(text: string, start: number): End {
  const word = LITERALS[text[start]];
  if (!word) return null;
  for (let k = 1; k < word.length; k++) {
    const at = start + k;
    if (at >= text.length) return { offset: at, reason: `unexpected end of input, expected '${word}'` };
    if (text[at] !== word[k]) return { offset: at, reason: `unexpected ${describeChar(text[at])}, expected '${word}'` };
  }
  return start + word.length;
}

function describeChar(c: string): string {
  const code = c.charCodeAt(0);
  return code < 0x20 || code === 0x7f ? `character U+${code.toString(16).padStart(4, '0').toUpperCase()}` : `'${c}'`;
}

/** Past this a path keeps its innermost part: a body nested 100000 levels deep must not make a 100000-level message. */
const PATH_MAX = 200;

/** `messages[0].content`: the field whose value (or key) the fault is in; empty at the top level. */
function pathOf(stack: Frame[]): string {
  let path = '';
  for (let k = stack.length - 1; k >= 0 && path.length <= PATH_MAX; k--) {
    const f = stack[k];
    if (f.key === null) continue;
    path = (f.array ? `[${f.key}]` : k > 0 ? `.${f.key}` : String(f.key)) + path;
  }
  return path.length > PATH_MAX ? `…${path.slice(path.length - PATH_MAX)}` : path;
}
