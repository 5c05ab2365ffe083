import { minifiedJson } from '../text/json-text';
import { FinishReason, GenerationEvent, TokenLogprob, ToolCallEvent } from '../core/generation-events';
import { randomUUID } from 'node:crypto';
import { OutputParser, ParsedOutput } from '../prompt/output-parsers';
import { NativeModel, NativeSampler, NativeTokenLogprob } from '../backend/native-addon';
import { StopMatcher } from '../text/stop-matcher';
import { ThoughtGate } from '../text/thought-gate';
import { CallWatch, ThoughtTags } from '../text/call-watch';
import { TokenTextDecoder, tokenDisplay } from '../text/token-text';
import { EventChannel } from './event-channel';
import type { PrefixEntry } from './prefix-cache';
import type { MediaSpan, PromptMedia } from '../media/vision-prompt';

/**
 * A request bound to a KV context (named session, context prefill): it runs on
 * the context's own sequence, which outlives the request.
 */
export interface SessionBinding {
  seq: number;
  /** Tokens the sequence holds now; the prompt starts with them. */
  held: Int32Array;
  /** Called with what the sequence holds once the request ends. */
  onRelease(held: Int32Array, completed: boolean): void;
}

/** What the scheduler needs to run one request. */
export interface SequenceSpec {
  modelName: string;
  promptTokens: Int32Array;
  sampler: NativeSampler;
  maxTokens: number;
  stop: string[];
  logprobs: number;
  retainPrefix: boolean;
  /** Start from a retained prefix when one matches (unless false). */
  reusePrefix?: boolean;
  /**
   * One of several sequences of a request that holds its place in the queue bound
   * (Scheduler.reserve: a decision's prefill and forks): not counted again.
   */
  reserved?: boolean;
  /** Retained prompts are shared within one partition only (the owner key; '' by default). */
  cachePartition?: string;
  /** Set when the output is parsed: for tool calls (parseCalls) and a reasoning model's thoughts. */
  parser?: OutputParser;
  parseCalls?: boolean;
  /** Control tokens shown as text (a parsed format's markers); others show as nothing. */
  shownSpecial?: Int32Array;
  /** What opens a tool call: the caller's stop strings apply to the text before it only, never to call syntax. */
  callMarker?: RegExp;
  /** The stops that still hold once a call opened (the template's own, which end the turn). */
  callStops?: string[];
  /** A reasoning template's think block: a call marker inside it opens no call. */
  thoughtTags?: ThoughtTags;
  /** The thoughts are content (reasoning_format none): the stop strings apply to them, as in llama-server. */
  stopsInThoughts?: boolean;
  ignoreEos?: boolean;
  /**
   * The prompt's images: their positions in promptTokens hold IMAGE_POSITION and are written by
   * Context.evalMedia, not decoded. Such a prompt is never retained, reused or bound to a context.
   */
  media?: PromptMedia;
  session?: SessionBinding;
  signal?: AbortSignal;
  /** Called once the request joins the running batch, with its prompt tokens read from a cache. */
  onAdmitted?(cachedTokens: number): void;
  /** Tokens scored at the first answer position (whatever their rank); onScored gets their logprobs. */
  scoreTokens?: Int32Array;
  onScored?(logprobs: Float32Array): void;
}

/**
 * One request inside the scheduler: its KV sequence id, prompt progress and
 * the output pipeline (bytes → UTF-8 → stop strings → optional tool parsing).
 */
export class Sequence {
  seq = -1;
  /** Prompt positions already in the KV cache for this sequence. */
  nPast = 0;
  cachedTokens = 0;
  /** The retained prompt whose cells this sequence shares (seq_cp), and how many. */
  sharedPrefix?: { entry: PrefixEntry; length: number };
  readonly generated: number[] = [];
  lastToken = -1;
  cancelled = false;
  /** Set when the sequence's last token came; `finish` (the done event) follows once its KV is settled. */
  ending?: { reason: FinishReason; stop?: string; at: number };
  /** Called once when the client goes away (the scheduler ends a chained step early). */
  onCancel?: () => void;
  finished = false;
  /** Its sampler and KV were handed back (Scheduler.release runs once per sequence). */
  released = false;
  readonly channel = new EventChannel<GenerationEvent>();
  readonly queuedAt = performance.now();
  prefillStart = 0;
  firstTokenAt = 0;

  private readonly decoder = new TokenTextDecoder();
  private stops: StopMatcher;
  private rawText = '';
  private emittedContent = '';
  private emittedReasoning = '';
  /** Tokens that wrote thoughts; tokens are counted to the thoughts or the answer as the parse shows their text. */
  private reasoningTokens = 0;
  private countedTokens = 0;
  private readonly shown: ReadonlySet<number>;
  /** Looks for the call marker (spec.callMarker) while there are stop strings to turn off. */
  private readonly callWatch: CallWatch | undefined;
  /** Keeps a reasoning model's think block from the stop strings (spec.thoughtTags). */
  private readonly thoughtGate: ThoughtGate | undefined;
  private pendingLogprobs: TokenLogprob[] = [];
  /** Where each pending logprob's token text starts in the decoded text: it goes out once released. */
  private pendingStarts: number[] = [];
  /** Characters decoded, and released past the stop matcher (a stop string's are never released). */
  private decodedChars = 0;
  private releasedChars = 0;
  /** Where each generated token's text ends in the decoded text; -1 while its character waits for more bytes. */
  private readonly tokenEnds: number[] = [];
  /** The stop string that ended it, if one did: its tokens' text never reached the client. */
  private stoppedBy?: string;

  constructor(
    readonly spec: SequenceSpec,
    private readonly model: NativeModel,
  ) {
    this.stops = new StopMatcher(spec.stop);
    this.shown = new Set(spec.parser ? spec.shownSpecial ?? [] : []);
    this.callWatch = spec.callMarker && spec.stop.length ? new CallWatch(spec.callMarker, spec.thoughtTags) : undefined;
    this.thoughtGate = spec.thoughtTags && spec.stop.length && !spec.stopsInThoughts ? new ThoughtGate(spec.thoughtTags) : undefined;
    this.channel.onCancel = () => this.cancel();
    // A client gone before the request was queued (during a model load, a long tokenize): 'abort' already fired.
    if (spec.signal?.aborted) this.cancelled = true;
    else spec.signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  // Removed when the sequence ends: a decision's 64 questions share one request's signal, and each
  // listener kept its sequence alive (and warned of a leak) until the request ended.
  private readonly onAbort = () => this.cancel();

  private unlisten(): void {
    this.spec.signal?.removeEventListener('abort', this.onAbort);
  }

  private cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.onCancel?.();
  }

  get prefilling(): boolean {
    return this.nPast < this.spec.promptTokens.length;
  }

  /** The image that starts where the prompt stands: it is written (evalMedia) before any more prompt is batched. */
  get pendingMedia(): MediaSpan | undefined {
    return this.spec.media?.spans.find((m) => m.start === this.nPast);
  }

  /** Where the prompt can be batched up to: the next image, else the prompt's end. */
  get textEnd(): number {
    const next = this.spec.media?.spans.find((m) => m.start >= this.nPast);
    return next ? next.start : this.spec.promptTokens.length;
  }

  /** Frees the prompt's preprocessed images (once it is released, or never ran). */
  dropMedia(): void {
    this.spec.media?.prompt.dispose();
  }

  /** Positions this sequence holds once its pending token is decoded. */
  get length(): number {
    return this.spec.promptTokens.length + this.generated.length;
  }

  /** Every token held in KV once generation ends (the last sampled token is never decoded). */
  heldTokens(): Int32Array {
    const all = new Int32Array(this.spec.promptTokens.length + Math.max(0, this.generated.length - 1));
    all.set(this.spec.promptTokens, 0);
    all.set(this.generated.slice(0, Math.max(0, this.generated.length - 1)), this.spec.promptTokens.length);
    return all;
  }

  /**
   * Generated tokens a context keeps once generation ended: all but the last sampled one (never
   * decoded), and after a stop string only those whose text the client got. A context holding the
   * stop string's tokens refused the next turn, which continues the text the client saw.
   */
  keptAnswerTokens(): number {
    const decoded = Math.max(0, this.generated.length - 1);
    if (this.stoppedBy === undefined) return decoded;
    let n = 0;
    while (n < decoded && this.tokenEnds[n] >= 0 && this.tokenEnds[n] <= this.releasedChars) n++;
    return n;
  }

  /**
   * Takes a sampled token. Returns a finish reason when generation must end.
   */
  accept(token: number, lp: NativeTokenLogprob | null, nCtxSeq: number): { finish?: FinishReason; stop?: string } {
    if (this.generated.length === 0) {
      this.firstTokenAt = performance.now();
      if (lp?.scored) this.spec.onScored?.(lp.scored);
      // The stream's first event, with or without text: a stream's opening frames wait for it, and
      // an answer whose text is held back (a forced call's syntax, the start of a stop string)
      // kept the client hearing nothing, headers included, until its end.
      if (this.spec.maxTokens !== 0) this.channel.push({ type: 'delta', text: '' });
    }
    // max_tokens 0 only fills the KV (context prefill): the sampled token is dropped.
    if (this.spec.maxTokens === 0) return { finish: 'length' };
    this.generated.push(token);
    this.tokenEnds.push(-1);
    this.lastToken = token;
    if (!this.spec.ignoreEos && this.model.isEog(token)) return { finish: 'stop' };
    const bytes = this.model.tokenToPiece(token, this.shown.size > 0 && this.shown.has(token));
    // A scoring request gets an entry without asking for logprobs.
    if (lp && this.spec.logprobs !== 0) {
      this.pendingLogprobs.push(this.renderLogprob(bytes, lp));
      this.pendingStarts.push(this.decodedChars);
    }
    const text = this.decoder.push(bytes);
    if (text) {
      this.decodedChars += text.length;
      // This token's text, and that of the tokens before it that held only part of a character.
      for (let i = this.tokenEnds.length - 1; i >= 0 && this.tokenEnds[i] < 0; i--) this.tokenEnds[i] = this.decodedChars;
      // Once a call opens, only the template's own stops hold (the caller's are for the answer's text).
      if (this.callWatch?.push(text)) this.stops = new StopMatcher(this.spec.callStops ?? [], this.stops.flush());
      // The think block (its tags too) goes out past the stop strings, which are for the answer.
      const { thought, answer } = this.thoughtGate ? this.thoughtGate.push(text) : { thought: '', answer: text };
      this.output(thought);
      const { emit, stop } = this.stops.push(answer);
      this.output(emit);
      if (stop !== undefined) return { finish: 'stop', stop };
    }
    if (this.generated.length >= this.spec.maxTokens) return { finish: 'length' };
    if (this.length + 1 > nCtxSeq) return { finish: 'length' };
    return {};
  }

  /** Flushes held text, parses tool calls and sends `done`. */
  finish(reason: FinishReason, stop: string | undefined, decodeEnd: number): void {
    if (this.finished) return;
    this.finished = true;
    this.stoppedBy = stop;
    this.unlisten();
    if (stop === undefined) {
      const last = this.decoder.end();
      const held = this.thoughtGate ? this.thoughtGate.push(last) : { thought: '', answer: last };
      const rest = this.thoughtGate?.flush() ?? { thought: '', answer: '' };
      this.output(held.thought + rest.thought);
      this.output(this.stops.push(held.answer + rest.answer).emit + this.stops.flush());
    }
    let finishReason = reason;
    if (this.spec.parser) {
      // llama.cpp's parser throws on output that fits no format it knows (a prefill that opened a
      // call): what was streamed stands, and the sequence still ends (a throw here hung it).
      let parsed: ParsedOutput;
      try {
        parsed = this.spec.parser.parse(this.rawText, false);
      } catch {
        parsed = { content: this.emittedContent, toolCalls: [] };
      }
      this.emitParsed(parsed);
      // Cut by max_tokens or a stop string: a call still being written is dropped, never sent with broken arguments.
      const complete = this.spec.parseCalls ? parsed.toolCalls.filter((c) => isJson(c.arguments)) : [];
      if (complete.length > 0) {
        const calls: ToolCallEvent[] = complete.map((c, index) => ({
          index,
          id: c.id || `call_${randomUUID().replace(/-/g, '').slice(0, 24)}`,
          name: c.name,
          arguments: minifiedJson(c.arguments),
        }));
        this.channel.push({ type: 'tool_calls', calls });
        // Cut by max_tokens, the answer says so even with calls in it: more may have followed.
        if (reason !== 'length') finishReason = 'tool_calls';
      }
    }
    // Tokens that only wrote the stop string keep their logprobs out too, as their text.
    if (stop === undefined) this.releasedChars = Infinity;
    const rest = this.takeLogprobs();
    if (rest) this.channel.push({ type: 'delta', text: '', logprobs: rest });
    const prefillEnd = this.firstTokenAt || decodeEnd;
    this.channel.push({
      type: 'done',
      finishReason,
      stopSequence: stop,
      model: this.spec.modelName,
      ...(this.spec.parser ? { output: this.rawText } : {}),
      usage: {
        promptTokens: this.spec.promptTokens.length,
        completionTokens: this.generated.length,
        cachedPromptTokens: this.cachedTokens,
        prefillMs: round(prefillEnd - (this.prefillStart || this.queuedAt)),
        decodeMs: round(this.firstTokenAt ? Math.max(0, decodeEnd - this.firstTokenAt) : 0),
        ...(this.reasoningTokens ? { reasoningTokens: this.reasoningTokens } : {}),
      },
    });
    this.channel.close();
  }

  fail(err: unknown): void {
    if (this.finished) return;
    this.finished = true;
    this.unlisten();
    this.channel.fail(err);
  }

  private output(text: string): void {
    if (!text) return;
    this.releasedChars += text.length;
    if (this.spec.parser) {
      this.rawText += text;
      let parsed: ParsedOutput;
      try {
        parsed = this.spec.parser.parse(this.rawText, true);
      } catch {
        return; // not readable yet: the final parse decides
      }
      this.emitParsed(parsed);
      return;
    }
    this.channel.push({ type: 'delta', text, logprobs: this.takeLogprobs() });
  }

  /** Emits the parts of the parsed thoughts and content not sent yet (thoughts come first). */
  private emitParsed(parsed: ParsedOutput): void {
    const reasoning = parsed.reasoningContent ?? '';
    const content = parsed.content;
    const answerGrew = content.length > this.emittedContent.length && content.startsWith(this.emittedContent);
    const thoughtGrew = reasoning.length > this.emittedReasoning.length && reasoning.startsWith(this.emittedReasoning);
    // The tokens since the last text came out wrote what this parse shows; the answer's when it grew too.
    if (thoughtGrew && !answerGrew) this.reasoningTokens += this.generated.length - this.countedTokens;
    if (thoughtGrew || answerGrew) this.countedTokens = this.generated.length;
    if (thoughtGrew) {
      const text = reasoning.slice(this.emittedReasoning.length);
      this.emittedReasoning = reasoning;
      this.channel.push({ type: 'reasoning', text, logprobs: this.takeLogprobs() });
    }
    if (answerGrew) {
      const text = content.slice(this.emittedContent.length);
      this.emittedContent = content;
      this.channel.push({ type: 'delta', text, logprobs: this.takeLogprobs() });
    }
  }

  /** The pending logprobs of tokens whose text has (at least partly) been released. */
  private takeLogprobs(): TokenLogprob[] | undefined {
    let n = 0;
    while (n < this.pendingLogprobs.length && this.pendingStarts[n] < this.releasedChars) n++;
    if (n === 0) return undefined;
    this.pendingStarts.splice(0, n);
    return this.pendingLogprobs.splice(0, n);
  }

  private renderLogprob(bytes: Buffer, lp: NativeTokenLogprob): TokenLogprob {
    return {
      token: tokenDisplay(bytes),
      bytes: Array.from(bytes),
      logprob: lp.logprob,
      top: (this.spec.logprobs < 0 ? [] : lp.top).map(([t, logprob]) => {
        const b = this.model.tokenToPiece(t, false);
        return { token: tokenDisplay(b), bytes: Array.from(b), logprob };
      }),
    };
  }
}

/** Arguments as compact JSON (grammars allow whitespace a weak model spends freely). */
function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
