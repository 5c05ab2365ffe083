import { randomFillSync } from 'node:crypto';
import { ClientGoneError } from '../../../engine/src/core/errors';
import { GenerationEvent, TokenLogprob, ToolCallEvent } from '../../../engine/src/core/generation-events';

export type DoneEvent = Extract<GenerationEvent, { type: 'done' }>;

export interface Segment {
  kind: 'reasoning' | 'text';
  text: string;
  /** Its tokens' log-probabilities, when they were asked for. */
  logprobs?: TokenLogprob[];
}

/**
 * Adds a piece to the ordered segments, joining it to the last one when of the same kind. A piece
 * with no text but logprobs (tokens whose text was held back) belongs to the last segment of its kind.
 */
export function addSegment(segments: Segment[], kind: Segment['kind'], text: string, logprobs?: TokenLogprob[]): void {
  let last = segments[segments.length - 1];
  if (!text && last?.kind !== kind) return;
  if (last?.kind === kind) last.text += text;
  else segments.push((last = { kind, text }));
  if (logprobs?.length) (last.logprobs ??= []).push(...logprobs);
}

export interface Collected {
  text: string;
  /** The model's thoughts ('' when it had none or they were not split out). */
  reasoning: string;
  /** Thoughts and text in the order they came (adjacent pieces of one kind joined). */
  segments: Segment[];
  toolCalls: ToolCallEvent[];
  logprobs: TokenLogprob[];
  done: DoneEvent;
}

/** Drains an event stream into one answer (the non-streaming form of every dialect). */
export async function collect(events: AsyncIterable<GenerationEvent>): Promise<Collected> {
  let text = '';
  let reasoning = '';
  const segments: Segment[] = [];
  const toolCalls: ToolCallEvent[] = [];
  const logprobs: TokenLogprob[] = [];
  let done: DoneEvent | undefined;
  for await (const ev of events) {
    if (ev.type === 'delta') {
      text += ev.text;
      addSegment(segments, 'text', ev.text, ev.logprobs);
      if (ev.logprobs) logprobs.push(...ev.logprobs);
    } else if (ev.type === 'reasoning') {
      reasoning += ev.text;
      addSegment(segments, 'reasoning', ev.text, ev.logprobs);
      if (ev.logprobs) logprobs.push(...ev.logprobs);
    } else if (ev.type === 'tool_calls') toolCalls.push(...ev.calls);
    else done = ev;
  }
  // A stream ends without `done` only when its request was cancelled: the client is gone.
  if (!done) throw new ClientGoneError();
  return { text, reasoning, segments, toolCalls, logprobs, done };
}

const ID_BYTES = 18;
// Filled from the system's CSPRNG 228 ids at a time: one randomBytes call per id
// (a buffer and a trip into OpenSSL) was a visible share of a short request.
const idPool = Buffer.alloc(ID_BYTES * 228);
let idNext = idPool.length;

/** Unguessable ids: prefix + 24 random base64url characters (18 bytes). */
export function newId(prefix: string): string {
  if (idNext + ID_BYTES > idPool.length) {
    randomFillSync(idPool);
    idNext = 0;
  }
  const id = idPool.toString('base64url', idNext, idNext + ID_BYTES);
  idNext += ID_BYTES;
  return prefix + id;
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
