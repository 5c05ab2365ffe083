import { ThoughtTags } from './call-watch';

/**
 * Splits a reasoning model's output into its leading think block (the tags included) and the
 * answer after it, as text arrives. The caller's stop strings are for the answer: they matched
 * the hidden `</think>` ("think>", "</", "\n\n" after it) and ended the turn with an empty answer
 * and a stop sequence the client never saw. Only the leading block counts, as llama.cpp's parser
 * reads thoughts only there. A tag split across pushes is held back until it is whole.
 */
export class ThoughtGate {
  /** undecided: the prompt did not open the block and no answer text came yet (the model may open it). */
  private state: 'undecided' | 'thinking' | 'answer';
  private held = '';

  constructor(private readonly tags: ThoughtTags) {
    this.state = tags.openAtStart ? 'thinking' : 'undecided';
  }

  /** The next text, as thoughts (never stopped on) and answer (for the stop strings), in that order. */
  push(text: string): { thought: string; answer: string } {
    if (this.state === 'answer') return { thought: '', answer: text };
    const buf = this.held + text;
    this.held = '';
    if (this.state === 'undecided') {
      const lead = buf.length - buf.trimStart().length;
      const rest = buf.slice(lead);
      if (rest.length === 0 || (rest.length < this.tags.start.length && this.tags.start.startsWith(rest))) {
        this.held = buf;
        return { thought: '', answer: '' };
      }
      if (!rest.startsWith(this.tags.start)) {
        this.state = 'answer';
        return { thought: '', answer: buf };
      }
      this.state = 'thinking';
      const opened = lead + this.tags.start.length;
      const after = this.push(buf.slice(opened));
      return { thought: buf.slice(0, opened) + after.thought, answer: after.answer };
    }
    let end: { at: number; tag: string } | undefined;
    for (const tag of this.tags.ends) {
      const at = buf.indexOf(tag);
      if (at >= 0 && (!end || at < end.at)) end = { at, tag };
    }
    if (end) {
      this.state = 'answer';
      const cut = end.at + end.tag.length;
      return { thought: buf.slice(0, cut), answer: buf.slice(cut) };
    }
    // Hold back what could be the start of a closing tag.
    const keep = partialTagAtEnd(buf, this.tags.ends);
    this.held = buf.slice(buf.length - keep);
    return { thought: buf.slice(0, buf.length - keep), answer: '' };
  }

  /** Text held back at the end of the output: thoughts while the block is open, else answer. */
  flush(): { thought: string; answer: string } {
    const rest = this.held;
    this.held = '';
    return this.state === 'thinking' ? { thought: rest, answer: '' } : { thought: '', answer: rest };
  }
}

/** The length of the longest end of `text` that begins one of `tags` (0 for none). */
function partialTagAtEnd(text: string, tags: string[]): number {
  let best = 0;
  for (const tag of tags) {
    for (let n = Math.min(tag.length - 1, text.length); n > best; n--) {
      if (text.endsWith(tag.slice(0, n))) {
        best = n;
        break;
      }
    }
  }
  return best;
}
