import { NativeContext, NativeModel, NativeSampler, NativeSamplerOptions } from '../backend/native-addon';
import { ServerShuttingDownError } from '../core/errors';
import { GenerationEvent } from '../core/generation-events';
import { KvLock } from './kv-lock';
import { KvPressure } from './kv-pressure';
import { BatchBuilder } from './batch-builder';
import { PrefixCache } from './prefix-cache';
import { SeqIds } from './seq-ids';
import { SamplerPool } from './sampler-pool';
import { Sequence, SequenceSpec } from './sequence';
import { SchedulerStats } from './scheduler-stats';
import { TokenIntake } from './token-intake';
import { SchedulerOptions } from './scheduler-options';
import { writePendingMedia } from './media-step';
import { QueueBound } from './queue-bound';
import { runStep, StepHost } from './step';
import { textTokens } from '../media/vision-prompt';

/** Prompt tokens waiting to be decoded above which retained cells leave the KV cache before the step. */
const EARLY_DEMOTE_PROMPT_TOKENS = 64;

/**
 * Continuous batching over one model's context. Each step decodes one batch
 * holding the next token of every generating sequence plus chunks of pending
 * prompts; a new request joins at the next step. All KV operations happen
 * between steps, never while a decode is in flight.
 */
export class Scheduler {
  readonly stats = new SchedulerStats();
  private readonly queue: Sequence[] = [];
  private readonly active: Sequence[] = [];
  private readonly freeSeqs: SeqIds;
  private readonly cache: PrefixCache;
  private readonly samplers: SamplerPool;
  private readonly kv = new KvLock();
  private running = false;
  private exclusiveWaiting = 0;
  private readonly bound: QueueBound;
  private closing = false;
  private readonly batches: BatchBuilder;
  private readonly intake: TokenIntake;
  private idle?: () => void;
  private readonly pressure: KvPressure;
  private readonly stepHost: StepHost;

  constructor(
    private readonly model: NativeModel,
    private readonly ctx: NativeContext,
    private readonly opts: SchedulerOptions,
  ) {
    this.batches = new BatchBuilder(opts.nBatch, opts.nCtxSeq);
    this.bound = new QueueBound(opts.concurrency + opts.queueLimit, this.active, this.queue, this.stats);
    this.intake = new TokenIntake(this.stats, this.active, opts.nCtxSeq, ctx);
    this.samplers = new SamplerPool((o) => ctx.createSampler(o));
    this.freeSeqs = new SeqIds(ctx.nSeqMax);
    this.cache = new PrefixCache(
      ctx,
      { maxEntries: opts.cacheSlots, maxResidentPositions: opts.cachePositions, maxHostBytes: opts.cacheHostBytes ?? 0, kvOnDevice: opts.kvOnDevice },
      (seq) => this.freeSeq(seq),
    );
    this.pressure = new KvPressure(this.cache, this.queue, this.active, this.samplers, this.stats, (s) => this.release(s, false));
    this.stepHost = {
      model,
      ctx,
      opts,
      stats: this.stats,
      batches: this.batches,
      intake: this.intake,
      pressure: this.pressure,
      active: this.active,
      queued: () => this.queue.length,
      kvWaiting: () => this.exclusiveWaiting,
      release: (s, retain) => this.release(s, retain),
    };
  }

  get queued(): number {
    return this.queue.length;
  }

  get activeCount(): number {
    return this.active.length;
  }

  get nCtxSeq(): number {
    return this.opts.nCtxSeq;
  }

  /** Sequences generating at once (-concurrency). */
  get concurrency(): number {
    return this.opts.concurrency;
  }

  /** A sampler for a request to submit (a finished request's, reset, when the options match). */
  sampler(opts: NativeSamplerOptions): NativeSampler {
    return this.samplers.take(opts);
  }

  /** A sampler taken with sampler() whose request was never submitted. */
  giveBackSampler(sampler: NativeSampler): void {
    this.samplers.give(sampler);
  }

  /** Samplers handed out again instead of built (see SamplerPool). */
  get samplerReuses(): number {
    return this.samplers.reuses;
  }

  /** Queues a request; throws QueueFullError past the queue bound. */
  submit(spec: SequenceSpec): AsyncIterable<GenerationEvent> {
    if (this.closing) throw new ServerShuttingDownError();
    if (!spec.reserved) this.bound.check();
    const s = new Sequence(spec, this.model);
    s.onCancel = () => this.ctx.requestYield();
    this.queue.push(s);
    this.stats.requests++;
    // A chained decode in flight ends after its current step so this one joins soon.
    this.ctx.requestYield();
    this.kick();
    return s.channel;
  }

  /** One place in the queue bound for a request that runs several sequences (see QueueBound). */
  reserve(): () => void {
    if (this.closing) throw new ServerShuttingDownError();
    return this.bound.reserve();
  }

  /**
   * Runs a KV operation between decode steps (forks, truncation, state reads).
   * Inside fn, allocSeq/freeSeqId may be used.
   */
  exclusive<T>(fn: () => T | Promise<T>): Promise<T> {
    // Counted so a pipelined decode does not start another chain before it.
    this.exclusiveWaiting++;
    this.ctx.requestYield();
    return this.kv.run(() => {
      this.exclusiveWaiting--;
      return fn();
    });
  }

  /** A sequence id for a long-lived context; undefined when every id is busy. Call inside exclusive(). */
  allocSeq(): number | undefined {
    return this.takeSeqId();
  }

  /** Returns a context's sequence id (its KV is removed). Call inside exclusive(). */
  freeSeqId(seq: number): void {
    this.freeSeq(seq);
  }

  /**
   * Called inside a step when the KV cache is full and no retained prompt is
   * left to give back (the contexts registry spills an idle context). Resolves
   * false when it could free nothing.
   */
  onKvPressure(fn: () => Promise<boolean>): void {
    this.pressure.spillIdleContext = fn;
  }

  /** Sequence ids not held by running requests or contexts (retained prompts count as free). */
  get availableSeqs(): number {
    return this.freeSeqs.size + this.cache.residentCount;
  }

  /** Retained prompts: entries, those with cells in the KV cache, bytes in host memory, moves between the two. */
  get promptCache(): { entries: number; resident: number; hostBytes: number; promotions: number; demotions: number } {
    const c = this.cache;
    return { entries: c.size, resident: c.residentCount, hostBytes: c.hostBytes, promotions: c.promotions, demotions: c.demotions };
  }

  /** Stops admitting, lets running sequences finish, then resolves. */
  async drain(): Promise<void> {
    this.closing = true;
    if (this.running || this.queue.length > 0) await new Promise<void>((resolve) => (this.idle = resolve));
    // KV work still queued (an idle demotion mid state read, a context operation)
    // settles before the caller disposes the context under it.
    await this.kv.run(() => undefined);
    this.samplers.clear();
  }

  private kick(): void {
    if (this.running) return;
    this.running = true;
    void this.loop();
  }

  private async loop(): Promise<void> {
    try {
      while (this.queue.length > 0 || this.active.length > 0) {
        await this.kv.run(async () => {
          this.reap();
          await this.admit();
          if (this.active.some((s) => s.pendingMedia)) await this.writeMedia();
          if (this.active.length > 0) {
            // Retained cells widen a step's attention: before a long prefill they go
            // first; otherwise after the step, so a short prompt's first token does not wait.
            const early = this.pendingPromptTokens() >= EARLY_DEMOTE_PROMPT_TOKENS;
            if (early) await this.demoteRetained();
            await runStep(this.stepHost);
            if (!early && this.active.length > 0) await this.demoteRetained();
          }
        });
      }
    } catch (err) {
      // A decode failure fails every sequence in flight; the loop restarts on the next submit.
      for (const s of [...this.active, ...this.queue]) s.fail(err);
      const [failed, waiting] = [this.active.splice(0), this.queue.splice(0)];
      for (const s of failed) this.release(s, false);
      for (const q of waiting) {
        this.samplers.give(q.spec.sampler);
        q.dropMedia();
      }
    } finally {
      this.running = false;
      if (this.queue.length > 0 || this.active.length > 0) this.kick();
      else {
        this.idle?.();
        if (!this.closing) setImmediate(() => void this.demoteWhileIdle().catch((err: Error) => process.emitWarning(`moving retained prompts out of the KV cache failed: ${err.message}`)));
      }
    }
  }

  /**
   * Between requests, retained prompts leave the KV cache one at a time (see
   * PrefixCache.demoteOneIdle for which): in a unified KV cache their cells would
   * widen the next request's first steps. Stops as soon as anything is queued or running.
   */
  private async demoteWhileIdle(): Promise<void> {
    const idle = () => !this.running && !this.closing && this.queue.length === 0 && this.active.length === 0;
    while (idle()) {
      const did = await this.kv.run(() => (idle() ? this.cache.demoteOneIdle() : false));
      if (!did) return;
    }
  }

  /** Drops cancelled sequences (client gone) before building the next batch. */
  private reap(): void {
    for (let i = this.active.length - 1; i >= 0; i--) {
      const s = this.active[i];
      if (s.cancelled && !s.finished) {
        s.finished = true;
        s.channel.close();
        this.stats.cancelled++;
      }
      if (s.finished) {
        this.active.splice(i, 1);
        this.release(s, false);
        this.pressure.holdAdmissions = false;
      }
    }
    for (let i = this.queue.length - 1; i >= 0; i--) {
      if (this.queue[i].cancelled) {
        const q = this.queue[i];
        q.channel.close();
        this.samplers.give(q.spec.sampler);
        q.dropMedia();
        // A context bound to it was never touched: let it go as it was.
        q.spec.session?.onRelease(q.spec.session.held, false);
        this.queue.splice(i, 1);
        this.stats.cancelled++;
      }
    }
  }

  private async admit(): Promise<void> {
    if (this.pressure.holdAdmissions && this.active.length > 0) return;
    this.pressure.holdAdmissions = false;
    while (this.queue.length > 0 && this.active.length < this.opts.concurrency) {
      const next = this.queue[0];
      // Graph sampling serves top logprobs (and scored tokens) on the CPU: such a request binds nothing.
      const config = next.spec.logprobs > 0 || next.spec.scoreTokens ? undefined : this.samplers.keyOf(next.spec.sampler);
      const seq = next.spec.session ? next.spec.session.seq : this.takeSeqId(config);
      if (seq === undefined) return;
      this.freeSeqs.ran(seq, config);
      const s = this.queue.shift() as Sequence;
      s.seq = seq;
      s.prefillStart = performance.now();
      if (s.spec.session) this.resumeSession(s);
      // A prompt with images neither reuses nor is retained (release): its image positions hold
      // one placeholder id, so token matching would take one picture's cells for another's.
      else if (s.spec.reusePrefix !== false && !s.spec.media) await this.reuseCachedPrefix(s);
      // Image positions are no tokens: the penalties see the prompt's text.
      s.spec.sampler.acceptPrompt(s.spec.media ? textTokens(s.spec.promptTokens) : s.spec.promptTokens);
      this.active.push(s);
      s.spec.onAdmitted?.(s.cachedTokens);
    }
  }

  /** Starts the new sequence with the longest retained prefix of its prompt. */
  private async reuseCachedPrefix(s: Sequence): Promise<void> {
    const { n, shared } = await this.cache.reuse(s.spec.promptTokens, s.seq, s.spec.cachePartition);
    if (n <= 0) return;
    s.nPast = n;
    s.cachedTokens = n;
    if (shared) s.sharedPrefix = { entry: shared, length: n };
    this.stats.cachedPromptTokens += n;
  }

  /** Images the running prompts reached, written between steps; a request whose image fails ends alone. */
  private async writeMedia(): Promise<void> {
    await writePendingMedia(this.ctx, this.active, () => this.pressure.relieve(), (s, err) => {
      this.active.splice(this.active.indexOf(s), 1);
      s.fail(err);
      this.release(s, false);
    });
  }

  /** Nothing to do on the decode path unless a retained prompt is resident in a KV cache in host memory. */
  private async demoteRetained(): Promise<void> {
    if (this.cache.demotesWhileRunning) await this.cache.demoteUnshared(this.active);
  }

  private pendingPromptTokens(): number {
    let n = 0;
    for (const s of this.active) if (s.prefilling) n += s.spec.promptTokens.length - s.nPast;
    return n;
  }

  /** A context's sequence already holds a prefix of the prompt: keep it, drop the rest. */
  private resumeSession(s: Sequence): void {
    const held = s.spec.session!.held;
    const n = Math.min(held.length, s.spec.promptTokens.length - 1);
    this.ctx.seqRemove(s.seq, n, -1);
    s.nPast = n;
    s.cachedTokens = n;
    this.stats.cachedPromptTokens += n;
  }

  private takeSeqId(config?: string): number | undefined {
    const id = this.freeSeqs.take(config);
    if (id !== undefined) return id;
    return this.cache.stealSeq();
  }

  private release(s: Sequence, retain: boolean): void {
    // Twice would hand its sampler to two requests and free its sequence id twice.
    if (s.released) return;
    s.released = true;
    this.samplers.give(s.spec.sampler);
    s.dropMedia();
    if (s.seq < 0) return;
    // A chained step may have decoded past the end JS chose (a stop string, a
    // cancel): the KV must hold exactly the kept tokens.
    if (s.generated.length > 0) this.ctx.seqRemove(s.seq, s.heldTokens().length, -1);
    if (s.spec.session) {
      // The context keeps its sequence; what the KV holds is exactly what was decoded. A request
      // whose client left keeps its prompt only: the answer never reached the client whole, and
      // the same request sent again must find the prompt it holds (it was a 400 "diverges"). One
      // ended by a stop string keeps the answer without it: the client's next turn continues that.
      const all = s.heldTokens();
      const keep = s.cancelled ? s.nPast : Math.min(all.length, s.nPast + s.keptAnswerTokens());
      if (keep < all.length) this.ctx.seqRemove(s.seq, keep, -1);
      s.spec.session.onRelease(all.subarray(0, keep), retain);
    } else if (retain && s.spec.retainPrefix && !s.spec.media) {
      for (const freed of this.cache.retain(s.seq, s.heldTokens(), s.spec.promptTokens.length, s.spec.cachePartition)) this.freeSeq(freed);
    } else {
      this.freeSeq(s.seq);
    }
    s.seq = -1;
  }

  private freeSeq(seq: number): void {
    this.ctx.seqRemove(seq, -1, -1);
    this.freeSeqs.give(seq);
  }
}
