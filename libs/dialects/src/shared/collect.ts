import { randomBytes } from 'node:crypto';
import { GenerationEvent, TokenLogprob, ToolCallEvent } from '../../../engine/src/core/generation-events';

export type DoneEvent = Extract<GenerationEvent, { type: 'done' }>;

export interface Collected {
  text: string;
  toolCalls: ToolCallEvent[];
  logprobs: TokenLogprob[];
  done: DoneEvent;
}

/** Drains an event stream into one answer (the non-streaming form of every dialect). */
export async function collect(events: AsyncIterable<GenerationEvent>): Promise<Collected> {
  let text = '';
  const toolCalls: ToolCallEvent[] = [];
  const logprobs: TokenLogprob[] = [];
  let done: DoneEvent | undefined;
  for await (const ev of events) {
    if (ev.type === 'delta') {
      text += ev.text;
      if (ev.logprobs) logprobs.push(...ev.logprobs);
    } else if (ev.type === 'tool_calls') toolCalls.push(...ev.calls);
    else done = ev;
  }
  if (!done) throw new Error('generation ended without finishing');
  return { text, toolCalls, logprobs, done };
}

/** Unguessable ids: prefix + 24 random base62-ish characters. */
export function newId(prefix: string): string {
  return prefix + randomBytes(18).toString('base64url');
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
