/**
 * E-mail addresses in any alphabet (RFC 6531: josé.garcía@empresa.es, user@münchen.de): an
 * ASCII-only pattern redacted half a name ("josé.garcí[EMAIL]").
 *
 * Found from each `@` by walking out over the characters an address may hold, in plain code: the
 * regular expressions this replaced kept one backtracking entry per character of a run, and a
 * 5.6M-character token overflowed V8's stack (a 500).
 *
 * In running text the local part is letters, marks, digits and `._%+-`, with an apostrophe between
 * letters (o'brien@example.ie; never first, so a quoted address keeps its quote); `=` does not count
 * ("email=bob@example.com" keeps its key). Letters of scripts written without spaces between words
 * (Han, kana, Thai, Lao, Khmer, Myanmar) are left out, so the text around an address there is not
 * taken with it ("連絡先はuser@example.comです"; Hangul is written with spaces: its addresses are
 * found). Those letters are taken when a dot (or `_%+-`) joins them to the rest ("张伟.li@…"):
 * nothing writes a word and an address that way.
 *
 * An address set apart by spaces or punctuation is found in any script (用户@例子.广告,
 * bob@例子.中国): there the delimiters say where it begins and ends.
 */

const UNSPACED = String.raw`\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Thai}\p{sc=Lao}\p{sc=Khmer}\p{sc=Myanmar}`;

// Character kinds, one bit each.
const WORD = 1; // a letter, mark or digit outside the unspaced scripts
const LETTER = 2; // the same without digits
const JOINER = 4; // . _ % + -
const UNSPACED_WORD = 8; // a letter, mark or digit of an unspaced script
const STOP = 16; // ends a set-apart address
const OPENS = 32; // may stand just before a set-apart address
const CLOSES = 64; // may stand just after one
const DIGIT = 128;

const KIND_TESTS: Array<[number, RegExp]> = [
  [WORD, new RegExp(`^(?![${UNSPACED}])[\\p{L}\\p{M}\\p{N}]$`, 'u')],
  [LETTER, new RegExp(`^(?![${UNSPACED}])[\\p{L}\\p{M}]$`, 'u')],
  [JOINER, /^[._%+-]$/],
  [UNSPACED_WORD, new RegExp(`^(?=[${UNSPACED}])[\\p{L}\\p{M}\\p{N}]$`, 'u')],
  [STOP, /^[\s@<>()[\]{},;:"'「」『』（）【】、，。！？]$/u],
  [OPENS, /^[\s<([{,;:"'「『（【]$/u],
  [CLOSES, /^[\s>)\]},;:"'」』）】、，。！？!?]$/u],
  [DIGIT, /^\d$/],
];

// Kinds by code point, worked out on first sight (bit 256: known).
const kinds = new Uint16Array(0x110000);

function kind(cp: number): number {
  let k = kinds[cp];
  if (k === 0) {
    const ch = String.fromCodePoint(cp);
    k = 256;
    for (const [bit, re] of KIND_TESTS) if (re.test(ch)) k |= bit;
    kinds[cp] = k;
  }
  return k;
}

/** The code point ending at `i` (exclusive) and its length in UTF-16 units. */
function before(t: string, i: number): [number, number] {
  const c = t.charCodeAt(i - 1);
  if (c >= 0xdc00 && c <= 0xdfff && i >= 2) {
    const h = t.charCodeAt(i - 2);
    if (h >= 0xd800 && h <= 0xdbff) return [((h - 0xd800) << 10) + (c - 0xdc00) + 0x10000, 2];
  }
  return [c, 1];
}

function at(t: string, i: number): [number, number] {
  const cp = t.codePointAt(i)!;
  return [cp, cp > 0xffff ? 2 : 1];
}

const APOSTROPHE = 39;
const DOT = 46;

/** Start of the local part in running text before the `@` at `a`; `a` when there is none. */
function localStart(t: string, a: number): number {
  let q = a;
  while (q > 0) {
    const [cp, len] = before(t, q);
    if (kind(cp) & (WORD | JOINER)) q -= len;
    else if (cp === APOSTROPHE && q < a && kind(at(t, q)[0]) & WORD) q -= 1;
    else break;
  }
  if (q < a && t.charCodeAt(q) === APOSTROPHE) q++;
  if (q < a && kind(t.charCodeAt(q)) & JOINER && q > 0 && kind(before(t, q)[0]) & UNSPACED_WORD) {
    // "张伟.li": the joiner says the letters before it belong to the name.
    while (q > 0) {
      const [cp, len] = before(t, q);
      if (!(kind(cp) & (WORD | JOINER | UNSPACED_WORD))) break;
      q -= len;
    }
  }
  return q;
}

/**
 * End of the domain in running text after the `@` at `a`, -1 when none: labels of letters, digits
 * and `-` joined by dots, the last one begun by two or more letters (it ends with them: "b.com1" is
 * "b.com").
 */
function domainEnd(t: string, a: number): number {
  let end = -1;
  for (let i = a + 1, label = 0; ; label++) {
    const from = i;
    let letters = 0;
    let lettersEnd = i;
    while (i < t.length) {
      const [cp, len] = at(t, i);
      const k = kind(cp);
      if (!(k & WORD) && cp !== 45) break;
      if (lettersEnd === i && k & LETTER) {
        letters++;
        lettersEnd = i + len;
      }
      i += len;
    }
    if (i === from) break;
    if (label >= 1 && letters >= 2) end = lettersEnd;
    if (t.charCodeAt(i) !== DOT) break;
    i++;
  }
  return end;
}

/** An address set apart by delimiters around the `@` at `a`, in any script; undefined when none. */
function setApart(t: string, a: number): [number, number] | undefined {
  let s = a;
  while (s > 0) {
    const [cp, len] = before(t, s);
    if (kind(cp) & STOP) break;
    s -= len;
  }
  if (s === a || (s > 0 && !(kind(before(t, s)[0]) & OPENS))) return undefined;
  // Labels of anything but delimiters and dots; the last begins with two or more characters that
  // are no digit (nor ! or ?, which close a sentence), then a delimiter or a sentence's last dot.
  let end = -1;
  for (let i = a + 1, label = 0; ; label++) {
    const from = i;
    let chars = 0;
    let charsEnd = i;
    while (i < t.length) {
      const [cp, len] = at(t, i);
      const k = kind(cp);
      if (k & STOP || cp === DOT) break;
      if (charsEnd === i && !(k & DIGIT) && cp !== 33 && cp !== 63) {
        chars++;
        charsEnd = i + len;
      }
      i += len;
    }
    if (i === from) break;
    if (label >= 1 && chars >= 2 && closes(t, charsEnd)) end = charsEnd;
    if (t.charCodeAt(i) !== DOT) break;
    i++;
  }
  return end < 0 ? undefined : [s, end];
}

function closes(t: string, i: number): boolean {
  if (i === t.length) return true;
  if (t.charCodeAt(i) === DOT) return i + 1 === t.length || /\s/.test(t[i + 1]);
  return (kind(at(t, i)[0]) & CLOSES) !== 0;
}

/**
 * Spans of addresses, one per `@` that has one (they may overlap: redact() joins them). Each
 * character is walked at most a few times: every walk stops at the next `@`.
 */
export function findEmails(t: string): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let a = t.indexOf('@'); a >= 0; a = t.indexOf('@', a + 1)) {
    const start = localStart(t, a);
    const end = start < a ? domainEnd(t, a) : -1;
    if (end > 0) out.push([start, end]);
    else {
      const apart = setApart(t, a);
      if (apart) out.push(apart);
    }
  }
  return out;
}
