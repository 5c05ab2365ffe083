/**
 * Retained prompts: finished sequences whose KV stays in the unified cache so a
 * later request starting with the same tokens shares those cells (seq_cp in a
 * unified KV buffer shares cells, it copies nothing). Bounded by entry count and
 * by retained positions; evicted least-recently-used.
 */
export interface PrefixEntry {
  seq: number;
  tokens: Int32Array;
  lastUsed: number;
}

export class PrefixCache {
  private readonly entries: PrefixEntry[] = [];
  private clock = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxPositions: number,
  ) {}

  get size(): number {
    return this.entries.length;
  }

  get positions(): number {
    return this.entries.reduce((n, e) => n + e.tokens.length, 0);
  }

  /** The entry sharing the longest common prefix with `tokens`, if any. */
  match(tokens: Int32Array): { entry: PrefixEntry; length: number } | undefined {
    let best: { entry: PrefixEntry; length: number } | undefined;
    for (const e of this.entries) {
      const n = commonPrefix(e.tokens, tokens);
      if (n > 0 && (!best || n > best.length)) best = { entry: e, length: n };
    }
    if (best) best.entry.lastUsed = ++this.clock;
    return best;
  }

  /**
   * Keeps `seq` holding `tokens`. Returns the sequence ids the caller must free:
   * entries made redundant (a prefix of the new one) and LRU overflow.
   */
  retain(seq: number, tokens: Int32Array): number[] {
    const freed: number[] = [];
    for (let i = this.entries.length - 1; i >= 0; i--) {
      const e = this.entries[i];
      if (e.tokens.length <= tokens.length && commonPrefix(e.tokens, tokens) === e.tokens.length) {
        freed.push(e.seq);
        this.entries.splice(i, 1);
      }
    }
    this.entries.push({ seq, tokens, lastUsed: ++this.clock });
    while (this.entries.length > this.maxEntries || (this.positions > this.maxPositions && this.entries.length > 0)) {
      const victim = this.evictLru();
      if (victim === undefined) break;
      freed.push(victim);
    }
    return freed;
  }

  /** Drops the least recently used entry; returns its sequence id. */
  evictLru(): number | undefined {
    if (this.entries.length === 0) return undefined;
    let at = 0;
    for (let i = 1; i < this.entries.length; i++) if (this.entries[i].lastUsed < this.entries[at].lastUsed) at = i;
    return this.entries.splice(at, 1)[0].seq;
  }

  /** Drops every entry; returns their sequence ids. */
  clear(): number[] {
    return this.entries.splice(0).map((e) => e.seq);
  }
}

export function commonPrefix(a: Int32Array, b: Int32Array): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
