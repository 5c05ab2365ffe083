import { StringDecoder } from 'node:string_decoder';
import { GenerationEvent, TokenLogprob } from '../../../../engine/src/core/generation-events';
import { StreamWriter } from '../../../../http/src/sse';
import { collect, newId, nowSeconds } from '../../shared/collect';
import { wireUsage } from './usage';

/** Renders the core event stream as text_completion objects. */
export class CompletionRenderer {
  private readonly id = newId('cmpl-');
  private readonly created = nowSeconds();

  constructor(
    private readonly model: string,
    /** The prompt, sent back in front of the completion (echo), or ''. */
    private readonly echo = '',
  ) {}

  async complete(events: AsyncIterable<GenerationEvent>): Promise<unknown> {
    const c = await collect(events);
    return {
      id: this.id,
      object: 'text_completion',
      created: this.created,
      model: this.model,
      choices: [{ index: 0, text: this.echo + c.text, logprobs: c.logprobs.length ? completionLogprobs(c.logprobs) : null, finish_reason: c.done.finishReason }],
      usage: wireUsage(c.done.usage),
    };
  }

  async stream(events: AsyncIterable<GenerationEvent>, out: StreamWriter): Promise<void> {
    if (this.echo) out.event(this.chunk(this.echo, null));
    for await (const ev of events) {
      if (out.closed) break;
      // The first event comes with the first token, text or not.
      out.open();
      if (ev.type === 'delta') {
        if (ev.text) out.event(this.chunk(ev.text, null));
      } else if (ev.type === 'done') {
        out.event({ ...this.chunk('', ev.finishReason), usage: wireUsage(ev.usage) });
        out.event('[DONE]');
      }
    }
    out.end();
  }

  private chunk(text: string, finish: string | null): Record<string, unknown> {
    return { id: this.id, object: 'text_completion', created: this.created, model: this.model, choices: [{ index: 0, text, logprobs: null, finish_reason: finish }] };
  }
}

/**
 * The legacy logprobs member: parallel arrays plus character offsets into the
 * text. Offsets follow the decoded bytes, so a character split across tokens
 * counts once, at the token that completes it.
 */
export function completionLogprobs(lps: TokenLogprob[]): unknown {
  const decoder = new StringDecoder('utf8');
  let offset = 0;
  const text_offset: number[] = [];
  for (const l of lps) {
    text_offset.push(offset);
    offset += decoder.write(Buffer.from(l.bytes)).length;
  }
  return {
    tokens: lps.map((l) => l.token),
    token_logprobs: lps.map((l) => l.logprob),
    top_logprobs: lps.map((l) => Object.fromEntries(l.top.map((t) => [t.token, t.logprob]))),
    text_offset,
  };
}
