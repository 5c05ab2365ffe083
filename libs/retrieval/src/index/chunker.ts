/** A piece of a document: offsets in UTF-16 code units (JavaScript string indexes), end exclusive. */
export interface Chunk {
  start: number;
  end: number;
  text: string;
}

/** Characters a chunk holds at most: about 250 tokens of English, well inside a small encoder's 512. */
export const CHUNK_CHARS = 1000;

/**
 * Boundaries tried in turn to cut a span that is too long: paragraphs, lines,
 * sentences, words. What none of them cuts small enough is cut hard.
 */
const SEPARATORS = [/\n[ \t]*\n\s*/g, /\n+/g, /(?<=[.!?…。])\s+/g, /\s+/g];

/**
 * Splits a document into chunks of at most `max` characters, at the largest
 * natural boundary that keeps them small, packing neighbouring pieces together.
 * Chunks do not overlap; each is trimmed of surrounding whitespace, and its
 * offsets point at exactly its text in the document.
 */
export function chunkText(text: string, max = CHUNK_CHARS): Chunk[] {
  const pieces: Array<[number, number]> = [];
  split(text, 0, text.length, 0, max, pieces);
  const chunks: Chunk[] = [];
  let cur: [number, number] | undefined;
  for (const p of pieces) {
    if (cur && p[1] - cur[0] <= max) cur[1] = p[1];
    else {
      if (cur) pushTrimmed(text, cur, chunks);
      cur = [p[0], p[1]];
    }
  }
  if (cur) pushTrimmed(text, cur, chunks);
  return chunks;
}

/** Pieces of [start, end) no longer than max, in order, cut at the separators from `level` on. */
function split(text: string, start: number, end: number, level: number, max: number, out: Array<[number, number]>): void {
  if (end - start <= max) {
    out.push([start, end]);
    return;
  }
  if (level >= SEPARATORS.length) {
    for (let s = start; s < end; ) {
      let e = Math.min(end, s + max);
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
      split(text, start + from, start + cut, level + 1, max, out);
      from = cut;
    }
  }
  split(text, start + from, end, level + 1, max, out);
}

function pushTrimmed(text: string, [s, e]: [number, number], out: Chunk[]): void {
  while (s < e && /\s/.test(text[s])) s++;
  while (e > s && /\s/.test(text[e - 1])) e--;
  if (e > s) out.push({ start: s, end: e, text: text.slice(s, e) });
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}
