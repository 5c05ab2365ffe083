/** The think block's tags of a reasoning template, and whether the prompt opened it. */
export interface ThoughtTags {
  start: string;
  ends: string[];
  openAtStart: boolean;
}

/** Characters of recent answer text a call marker is looked for in. */
const MARKER_WINDOW = 1024;

/**
 * Watches the output for the lazy tool grammar's call marker: from there on the output is call
 * syntax, which the caller's stop strings are not for. A marker inside the thoughts of a
 * reasoning template opens nothing (llama.cpp does not arm the call grammar there either).
 * Tags and markers split across tokens are found: text is scanned with what came before it.
 */
export class CallWatch {
  /** Recent answer text (outside thoughts), where the marker is looked for. */
  private answer = '';
  private thinking: boolean;
  /** The end of the text already scanned for tags, kept for a tag split across pushes. */
  private tail = '';
  private readonly tagLen: number;
  opened = false;

  constructor(
    private readonly marker: RegExp,
    private readonly thoughts?: ThoughtTags,
  ) {
    this.thinking = thoughts?.openAtStart ?? false;
    this.tagLen = thoughts ? Math.max(thoughts.start.length, ...thoughts.ends.map((e) => e.length)) : 0;
  }

  /** Takes the next text; true once (when this text opens a call). */
  push(text: string): boolean {
    if (this.opened) return false;
    if (!this.thoughts) return this.look(text);
    const { start: open, ends } = this.thoughts;
    // The tail was scanned before: a tag ending in it was seen then, and its answer text looked at.
    const buf = this.tail + text;
    const seen = this.tail.length;
    let i = 0;
    for (;;) {
      if (this.thinking) {
        const end = earliest(buf, ends, i, seen);
        if (!end) break;
        this.thinking = false;
        i = end.at + end.tag.length;
        continue;
      }
      const start = earliest(buf, [open], i, seen);
      const upTo = start ? start.at : buf.length;
      const from = Math.max(i, seen);
      if (upTo > from && this.look(buf.slice(from, upTo))) return true;
      if (!start) break;
      this.thinking = true;
      i = start.at + start.tag.length;
    }
    this.tail = this.tagLen > 1 ? buf.slice(-(this.tagLen - 1)) : '';
    return false;
  }

  private look(text: string): boolean {
    this.answer = (this.answer + text).slice(-MARKER_WINDOW);
    if (!this.marker.test(this.answer)) return false;
    this.opened = true;
    return true;
  }
}

/** The first of `tags` in `text` from `from` on that ends past `seen` (earlier ones were found before). */
function earliest(text: string, tags: string[], from: number, seen: number): { at: number; tag: string } | undefined {
  let best: { at: number; tag: string } | undefined;
  for (const tag of tags) {
    if (!tag) continue;
    let at = text.indexOf(tag, from);
    while (at >= 0 && at + tag.length <= seen) at = text.indexOf(tag, at + 1);
    if (at >= 0 && (!best || at < best.at)) best = { at, tag };
  }
  return best;
}
