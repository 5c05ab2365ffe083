import { GenerationEvent, TokenLogprob, ToolCallEvent, Usage } from '../../../../engine/src/core/generation-events';
import { StreamWriter } from '../../../../http/src/sse';
import { collect, DoneEvent } from '../../shared/collect';

export type RunnerAnswerKind = 'chat' | 'generate';

export interface RunnerRenderOptions {
  /** The final object's `context` (/api/generate without raw): prompt and answer as token ids. */
  contextOf?: (answer: string) => Promise<number[]>;
  /** top_logprobs was asked for: each token's alternatives go out with it. */
  topLogprobs?: boolean;
}

/** Milliseconds → the local-runner's integer nanoseconds. */
export const ns = (ms: number): number => Math.round(ms * 1e6);

/**
 * Renders the core event stream as local-runner objects: NDJSON chunks with
 * done:false, then a final object with done:true and the timings (nanoseconds),
 * or that final object alone (stream:false) with the whole answer in it.
 */
export class RunnerRenderer {
  constructor(
    private readonly kind: RunnerAnswerKind,
    private readonly model: string,
    /** performance.now() when the request arrived: total_duration counts from there. */
    private readonly startedAt: number,
    /** Nanoseconds spent loading the model for this request (0 when it was resident). */
    private readonly loadNs: number,
    private readonly opts: RunnerRenderOptions = {},
  ) {}

  async complete(events: AsyncIterable<GenerationEvent>): Promise<Record<string, unknown>> {
    const c = await collect(events);
    return { ...this.chunk(c.text, c.toolCalls, c.logprobs, c.reasoning), ...this.final(c.done), ...(await this.context(c.done.output ?? c.text)) };
  }

  async stream(events: AsyncIterable<GenerationEvent>, out: StreamWriter): Promise<void> {
    let answer = '';
    for await (const ev of events) {
      if (out.closed) break;
      // The first event comes with the first token, text or not.
      out.open();
      if (ev.type === 'delta') {
        // Kept only for the final `context`: the other streams build no copy of their text.
        if (this.opts.contextOf) answer += ev.text;
        // Tokens that only wrote a held-back stop string come as a delta without text: their logprobs go too.
        if (ev.text || ev.logprobs?.length) out.line({ ...this.chunk(ev.text, [], ev.logprobs), done: false });
      } else if (ev.type === 'reasoning') {
        out.line({ ...this.chunk('', [], ev.logprobs, ev.text), done: false });
      } else if (ev.type === 'tool_calls') {
        out.line({ ...this.chunk('', ev.calls), done: false });
      } else {
        // The output as generated when it was parsed: a reasoning model's thoughts belong in the context too.
        out.line({ ...this.chunk('', []), ...this.final(ev), ...(await this.context(ev.output ?? answer)) });
      }
    }
    out.end();
  }

  private async context(answer: string): Promise<{ context?: number[] }> {
    return this.opts.contextOf ? { context: await this.opts.contextOf(answer) } : {};
  }

  private chunk(text: string, calls: ToolCallEvent[], logprobs?: TokenLogprob[], thinking?: string): Record<string, unknown> {
    const head = { model: this.model, created_at: new Date().toISOString() };
    const lp = logprobs?.length ? { logprobs: logprobs.map((l) => wireLogprob(l, this.opts.topLogprobs ?? false)) } : {};
    // A reasoning model's thoughts: `thinking` beside the text, as the local runner sends them.
    const thought = thinking ? { thinking } : {};
    if (this.kind === 'generate') return { ...head, response: text, ...thought, ...lp };
    const message: Record<string, unknown> = { role: 'assistant', content: text, ...thought };
    if (calls.length) message.tool_calls = calls.map(wireToolCall);
    return { ...head, message, ...lp };
  }

  private final(done: DoneEvent): Record<string, unknown> {
    return {
      done: true,
      // A tool call ends the turn normally: the local-runner reports it as stop.
      done_reason: done.finishReason === 'length' ? 'length' : 'stop',
      ...this.timings(done.usage),
    };
  }

  private timings(u: Usage): Record<string, number> {
    return {
      total_duration: ns(performance.now() - this.startedAt),
      load_duration: this.loadNs,
      prompt_eval_count: u.promptTokens,
      prompt_eval_duration: ns(u.prefillMs),
      eval_count: u.completionTokens,
      // The first token comes out of the prompt's step, so one token takes no decode time: at least
      // 1 µs then, as llama-server reports, so clients dividing count by duration get no infinity.
      eval_duration: u.completionTokens > 0 ? Math.max(1000, ns(u.decodeMs)) : ns(u.decodeMs),
    };
  }
}

/** Arguments go out as an object (the local-runner's shape), not a JSON string. */
function wireToolCall(c: ToolCallEvent): Record<string, unknown> {
  let args: unknown = {};
  try {
    args = c.arguments ? JSON.parse(c.arguments) : {};
  } catch {
    args = { arguments: c.arguments }; // grammar-forced calls parse; keep a broken one visible rather than drop it
  }
  return { ...(c.id ? { id: c.id } : {}), function: { index: c.index, name: c.name, arguments: args } };
}

/** The local runner's shape: token, logprob, bytes, and top_logprobs when alternatives were asked for. */
function wireLogprob(l: TokenLogprob, withTop: boolean): Record<string, unknown> {
  const one = { token: l.token, logprob: l.logprob, bytes: l.bytes };
  return withTop ? { ...one, top_logprobs: l.top.map((t) => ({ token: t.token, logprob: t.logprob, bytes: t.bytes })) } : one;
}
