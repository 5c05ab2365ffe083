/** A piece of a document: offsets in UTF-16 code units (JavaScript string indexes), end exclusive. */
export interface Chunk {
  start: number;
  end: number;
  text: string;
}

/**
 * A chunk's size limit, in characters of English: about 250 tokens, well inside a small encoder's
 * 512. Other scripts take more tokens per character (a Han or kana character is about one token,
 * and the encoder truncates at 512), so a character counts by its UTF-8 length: 1 below U+0080,
 * 2 below U+0800 (Cyrillic, Greek, Arabic…), 4 beyond (Han, kana, Hangul, Thai, emoji).
 */
export const CHUNK_CHARS = 1000;

/**
 * Boundaries tried in turn to cut a span that is too long: paragraphs, lines,
 * sentences, words. What none of them cuts small enough is cut hard.
 */
const SEPARATORS = [/\r?\n[ \t]*\r?\n\s*/g, /[\r\n]+/g, /(?<=[.!?…。])\s+/g, /\s+/g];

/** Cumulative weights of a text's characters (see CHUNK_CHARS); an ASCII text's weight is its length. */
class Weights {
  private readonly sums?: Uint32Array;
  constructor(text: string) {
    if (!/[^\x00-\x7f]/.test(text)) return;
    const sums = new Uint32Array(text.length + 1);
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      // A surrogate pair's two halves count 2 each: 4 for the character.
      sums[i + 1] = sums[i] + (c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c <= 0xdfff ? 2 : 4);
    }
    this.sums = sums;
  }
  of(start: number, end: number): number {
    return this.sums ? this.sums[end] - this.sums[start] : end - start;
  }
  /** The furthest end after `start` (and at least one character on) whose span weighs at most max. */
  reach(start: number, end: number, max: number): number {
    if (!this.sums) return Math.min(end, start + max);
    let lo = start + 1;
    let hi = end;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.sums[mid] - this.sums[start] <= max) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }
}

/**
 * Splits a document into chunks of at most `max` (weighed as CHUNK_CHARS says), at the largest
 * natural boundary that keeps them small, packing neighbouring pieces together.
 * Chunks do not overlap; each is trimmed of surrounding whitespace, and its
 * offsets point at exactly its text in the document.
 */
export function chunkText(text: string, max = CHUNK_CHARS): Chunk[] {
  const pieces: Array<[number, number]> = [];
  const w = new Weights(text);
  split(text, w, 0, text.length, 0, max, pieces);
  const chunks: Chunk[] = [];
  let cur: [number, number] | undefined;
  for (const p of pieces) {
    if (cur && w.of(cur[0], p[1]) <= max) cur[1] = p[1];
    else {
      if (cur) pushTrimmed(text, cur, chunks);
      cur = [p[0], p[1]];
    }
  }
  if (cur) pushTrimmed(text, cur, chunks);
  return chunks;
}

/** Pieces of [start, end) no longer than max, in order, cut at the separators from `level` on. */
function split(text: string, w: Weights, start: number, end: number, level: number, max: number, out: Array<[number, number]>): void {
  if (w.of(start, end) <= max) {
    out.push([start, end]);
    return;
  }
  if (level >= SEPARATORS.length) {
    for (let s = start; s < end; ) {
      let e = w.reach(s, end, max);
      // Never between the two halves of a surrogate pair.
      if (e < end && isLowSurrogate(text.charCodeAt(e)) && e - 1 > s) e--;
      out.push([s, e]);
      s = e;
    }
    return;
  }
  const re = new RegExp(SEPARATORS[level].source, 'g');
  re.lastIndex = 0;
  const span = text.slice(start, end);
  let from = 0;
  for (let m = re.exec(span); m; m = re.exec(span)) {
    if (m[0].length === 0) {
      re.lastIndex++;
      continue;
    }
    // The separator stays with the piece before it (chunks are trimmed).
    const cut = m.index + m[0].length;
    if (cut > from && cut < span.length) {
      split(text, w, start + from, start + cut, level + 1, max, out);
      from = cut;
    }
  }
  split(text, w, start + from, end, level + 1, max, out);
}

function pushTrimmed(text: string, [s, e]: [number, number], out: Chunk[]): void {
  while (s < e && /\s/.test(text[s])) s++;
  while (e > s && /\s/.test(text[e - 1])) e--;
  if (e > s) out.push({ start: s, end: e, text: text.slice(s, e) });
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}
