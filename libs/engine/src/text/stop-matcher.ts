/**
 * Finds stop strings in streamed text, including ones split across tokens.
 * Text that could still be the start of a stop string is held back, so a stop
 * string is never emitted.
 */
export class StopMatcher {
  private pending = '';
  private readonly maxLen: number;

  /** `held`: text an earlier matcher held back, which this one goes on from. */
  constructor(private readonly stops: readonly string[], held = '') {
    this.stops = stops.filter((s) => s.length > 0);
    this.maxLen = this.stops.reduce((m, s) => Math.max(m, s.length), 0);
    this.pending = held;
  }

  /** Adds text; returns what is safe to emit, and the stop string if one matched. */
  push(text: string): { emit: string; stop?: string } {
    if (this.maxLen === 0) {
      const emit = this.pending + text;
      this.pending = '';
      return { emit };
    }
    this.pending += text;
    let best = -1;
    let which: string | undefined;
    for (const s of this.stops) {
      const i = this.pending.indexOf(s);
      if (i >= 0 && (best < 0 || i < best)) {
        best = i;
        which = s;
      }
    }
    if (which !== undefined) {
      const emit = this.pending.slice(0, best);
      this.pending = '';
      return { emit, stop: which };
    }
    const hold = this.partialSuffix();
    const emit = this.pending.slice(0, this.pending.length - hold);
    this.pending = this.pending.slice(this.pending.length - hold);
    return { emit };
  }

  /** Whatever is still held back (emitted when generation ends without a stop). */
  flush(): string {
    const rest = this.pending;
    this.pending = '';
    return rest;
  }

  /** Length of the longest suffix of pending that is a proper prefix of some stop. */
  private partialSuffix(): number {
    const p = this.pending;
    const upTo = Math.min(p.length, this.maxLen - 1);
    for (let len = upTo; len > 0; len--) {
      const tail = p.slice(p.length - len);
      if (this.stops.some((s) => s.startsWith(tail))) return len;
    }
    return 0;
  }
}
