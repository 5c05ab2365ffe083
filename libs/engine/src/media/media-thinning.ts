/**
 * Which pictures of a prompt are kept when there are more than a request reads, or more than
 * the context holds. Loose images (the caller's, a PDF's drawn pages) lose their earliest first:
 * a conversation's latest pictures are the ones asked about. A video keeps frames spread evenly
 * over its length. The group with the most pictures gives one up at a time, so a long video
 * cannot crowd out the images beside it, nor twenty images a short clip.
 */

/** Loose images one request reads; the earliest past it are left out. */
export const MAX_IMAGES = 16;
/** Pictures (images and video frames together) one request reads. */
export const MAX_PICTURES = 32;

/** One picture of a prompt: loose (`group` 'images') or frame `index` of a video ('video 1'). */
export interface PictureSlot {
  group: string;
  index: number;
}

export const LOOSE = 'images';

/** The slots kept under `total` pictures at most (and MAX_IMAGES loose ones), as a set of positions in `slots`. */
export function keptPictures(slots: PictureSlot[], total: number): Set<number> {
  const members = new Map<string, number[]>();
  slots.forEach((s, i) => members.set(s.group, [...(members.get(s.group) ?? []), i]));
  const target = new Map<string, number>();
  for (const [g, m] of members) target.set(g, g === LOOSE ? Math.min(m.length, MAX_IMAGES) : m.length);
  let sum = [...target.values()].reduce((a, b) => a + b, 0);
  while (sum > Math.max(0, total)) {
    let largest = '';
    for (const [g, n] of target) if (n > (target.get(largest) ?? -1)) largest = g;
    target.set(largest, target.get(largest)! - 1);
    sum--;
  }
  const kept = new Set<number>();
  for (const [g, m] of members) {
    const n = target.get(g)!;
    if (g === LOOSE) m.slice(m.length - n).forEach((i) => kept.add(i));
    else evenly(m.length, n).forEach((k) => kept.add(m[k]));
  }
  return kept;
}

/** `n` of `of` indices spread evenly, each at the middle of its share. */
export function evenly(of: number, n: number): number[] {
  if (n >= of) return [...Array(of).keys()];
  return [...Array(n).keys()].map((i) => Math.floor(((i + 0.5) * of) / n));
}
