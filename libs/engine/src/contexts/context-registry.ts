import { readFileSync, rmSync } from 'node:fs';
import { NativeContext, NativeModel } from '../backend/native-addon';
import { ClientGoneError, InvalidRequestError } from '../core/errors';
import { Scheduler } from '../scheduler/scheduler';
import { SessionBinding } from '../scheduler/sequence';
import { ContextBusyError, ContextCapacityError, ContextNotFoundError } from './context-errors';

/** The form of the ids this registry gives out; a session name of that form would collide with one. */
const CONTEXT_ID = /^ctx_\d+$/;
import { KvContext } from './kv-context';
import { Residency } from './residency';

/**
 * Tokens at the end of a context that a new prompt may re-tokenize differently;
 * a short context keeps at least its first half (else any prompt replaced one of 8 tokens).
 */
const RETOKENIZE_SLACK = 8;

/** Contexts of an unloaded model, every one spilled to disk (ContextRegistry.suspend). */
export interface SuspendedContexts {
  contexts: KvContext[];
  names: Array<[string, KvContext]>;
  /** Per file and weights (model-manager): another load of the same file and weights spills here too. */
  spillDir: string;
}

/**
 * The contexts of one loaded model. Every KV operation runs through the
 * scheduler's exclusive() so it never overlaps a decode step. Contexts beyond
 * the resident budget are spilled to disk (least recently used first) and come
 * back transparently on use; forks get a sequence on first use (residency.ts).
 */
export class ContextRegistry {
  private readonly byId = new Map<string, KvContext>();
  /** Named sessions (svc_session), per owner: sessionKey(owner, name). */
  private readonly byName = new Map<string, KvContext>();
  private readonly residency: Residency;
  private nextId = 1;

  constructor(
    private readonly model: NativeModel,
    private readonly ctx: NativeContext,
    private readonly scheduler: Scheduler,
    private readonly spillDir: string,
    maxResident: number,
  ) {
    this.residency = new Residency(ctx, scheduler, spillDir, maxResident, () => this.byId.values());
    scheduler.onKvPressure(() => this.residency.spillIdle());
  }

  /** The model is going for good (its file was deleted, or the server stops): its contexts and their spill files go with it. */
  dispose(): void {
    this.byId.clear();
    this.byName.clear();
    rmSync(this.spillDir, { recursive: true, force: true });
  }

  /**
   * The model is being unloaded (keep_alive, memory) but its contexts stay, as
   * the spec's contexts leave only by DELETE: every resident one is written to
   * its spill file, which outlives this registry. Call after the scheduler drained.
   */
  async suspend(): Promise<SuspendedContexts> {
    await this.scheduler.exclusive(() => this.residency.spillAll());
    return { contexts: [...this.byId.values()], names: [...this.byName], spillDir: this.spillDir };
  }

  /** Ids go on from `n` (the file's earlier loads used those below it: an old id never names a newer context). */
  continueIdsFrom(n: number): void {
    this.nextId = Math.max(this.nextId, n);
  }

  get nextContextId(): number {
    return this.nextId;
  }

  /**
   * A new load of the model takes over what suspend() kept: the contexts, all on
   * disk, come back on first use. Other weights at the same path (another spill
   * folder) drop them.
   */
  adopt(s: SuspendedContexts): void {
    if (s.spillDir !== this.spillDir) {
      rmSync(s.spillDir, { recursive: true, force: true });
      return;
    }
    for (const c of s.contexts) this.byId.set(c.id, c);
    for (const [k, c] of s.names) this.byName.set(k, c);
  }

  /** Every context, hidden ones included (stored responses', decisions' while they run). */
  get size(): number {
    return this.byId.size;
  }

  list(owner: string): KvContext[] {
    return [...this.byId.values()].filter((c) => c.owner === owner && !c.hidden);
  }

  /** Another owner's context does not exist (404, never 403); hidden ones only when asked for. */
  get(id: string, owner: string, hidden = false): KvContext | undefined {
    const c = this.byId.get(id);
    return c && c.owner === owner && c.hidden === hidden ? c : undefined;
  }

  /**
   * A new context, optionally prefilled with `tokens`. A client gone (`signal`) before the
   * prefill ends gets no context: it could never learn its id (ClientGoneError).
   */
  async create(owner: string, tokens: Int32Array | undefined, parent = '', opts: { hidden?: boolean; signal?: AbortSignal; reserved?: boolean; answerFrom?: number } = {}): Promise<KvContext> {
    const c = new KvContext(`ctx_${this.nextId++}`, owner, parent, Math.floor(Date.now() / 1000));
    c.hidden = opts.hidden ?? false;
    // Listed in the same critical section: the resident count must see its sequence.
    await this.scheduler.exclusive(async () => {
      c.seq = await this.residency.allocSeq();
      this.byId.set(c.id, c);
    });
    if (tokens && tokens.length > 0) {
      try {
        await this.prefill(c, tokens, opts.signal, opts.reserved, opts.answerFrom);
        if (opts.signal?.aborted) throw new ClientGoneError();
      } catch (err) {
        await this.delete(c);
        throw err;
      }
    }
    return c;
  }

  /**
   * n children sharing every cell of the parent, lazily: each records its
   * source and gets a sequence on first use, so the fork costs the same at any
   * length and a spilled parent stays on disk.
   */
  async fork(parent: KvContext, n: number): Promise<{ children: KvContext[]; ms: number }> {
    // A fork only reads its parent (the spec's 409 is for writes): a parent a request is
    // generating on gives children of what it holds, the prompt prefix bound (bind trims its
    // tokens to it first), whose cells the generation never touches.
    this.checkLive(parent);
    let ms = 0;
    const children: KvContext[] = [];
    // Inside exclusive(): the residency rules read the set of dependents between awaits.
    await this.scheduler.exclusive(() => {
      this.checkLive(parent); // deleted while this waited
      // fork_ms is the fork itself, not the wait for a decode step in flight.
      const started = performance.now();
      const source = parent.lazySource ?? parent;
      for (let i = 0; i < n; i++) {
        const child = new KvContext(`ctx_${this.nextId++}`, parent.owner, parent.id, Math.floor(Date.now() / 1000));
        child.lazySource = source;
        child.tokens = parent.tokens;
        child.sharedWithParent = parent.tokens.length;
        child.answerFrom = parent.answerFrom;
        child.hidden = parent.hidden;
        this.byId.set(child.id, child);
        children.push(child);
      }
      ms = performance.now() - started;
    });
    return { children, ms };
  }

  async truncate(c: KvContext, n: number): Promise<KvContext> {
    return this.withContext(c, () =>
      this.scheduler.exclusive(async () => {
        // A lazy context reads fewer of its source's positions: no KV to touch.
        if (!c.lazySource) {
          await this.residency.makeResident(c);
          await this.residency.detach(c, n);
          this.ctx.seqRemove(c.seq as number, n, -1);
          // A child bound just now (c busy, so not spilled then) may have passed the budget.
          await this.residency.trim();
        }
        c.tokens = c.tokens.slice(0, n);
        c.sharedWithParent = Math.min(c.sharedWithParent, n);
        if (c.answerFrom !== undefined && c.answerFrom >= n) c.answerFrom = undefined;
        return c;
      }),
    );
  }

  async delete(c: KvContext): Promise<void> {
    if (c.busy) throw new ContextBusyError();
    this.byId.delete(c.id);
    if (c.sessionKey) this.byName.delete(c.sessionKey);
    await this.scheduler.exclusive(async () => {
      try {
        await this.residency.handOver(c);
      } catch (err) {
        // Its spill file could not pass to its heir (a file system error): the delete is refused, nothing changed.
        if (c.spillPath) {
          this.byId.set(c.id, c);
          if (c.sessionKey) this.byName.set(c.sessionKey, c);
        }
        throw err;
      }
      c.lazySource = undefined;
    });
  }

  /** Deletes the context now, or when the request bound to it ends. */
  async release(c: KvContext): Promise<void> {
    if (c.busy) c.dropWhenIdle = true;
    else await this.delete(c);
  }

  /**
   * The serialized KV state of a context (llama.cpp's per-sequence state) and the tokens it
   * holds, read together (a request ending between the two would write a file whose tokens do
   * not match its cells). A context a request is generating on is read as what it holds (the
   * prompt prefix bound): its cells, shared with a sequence of their own, without the ones the
   * generation is writing. Reading is no write: no 409.
   */
  async readState(c: KvContext): Promise<{ state: Buffer; tokens: Int32Array; answerFrom?: number }> {
    this.checkLive(c);
    return this.scheduler.exclusive(async () => {
      this.checkLive(c);
      const tokens = c.tokens;
      const answerFrom = c.answerFrom !== undefined && c.answerFrom < tokens.length ? c.answerFrom : undefined;
      return { state: await this.readCells(c, tokens), tokens, answerFrom };
    });
  }

  /** readState's cells (inside exclusive()). */
  private async readCells(c: KvContext, tokens: Int32Array): Promise<Buffer> {
    // Busy and resident: a request bound to it (or a truncate waiting its turn). A lazy or
    // spilled context has no cells of its own to share: it is read as when idle.
    if (c.busy && c.seq !== undefined) {
      const seq = await this.residency.allocSeq(c, true);
      try {
        this.ctx.seqCopy(c.seq as number, seq, 0, tokens.length);
        return await this.ctx.stateSeqGet(seq);
      } finally {
        this.scheduler.freeSeqId(seq);
      }
    }
    if (c.seq === undefined && c.spillPath) {
      if (c.spillCells === undefined) return readFileSync(c.spillPath);
      // An inherited file holds its source's cells past the tokens: read through a sequence of
      // its own for a moment, cut, and left on disk (no slot is taken: a read while every slot
      // is busy answered 429, where any other spilled context's answers 200).
      return this.residency.readCut(c, c.spillPath, c.spillCells);
    }
    await this.residency.makeResident(c); // a lazy fork: bound to its source's cells
    return this.ctx.stateSeqGet(c.seq as number);
  }

  /** A new context from saved tokens and state (restore, import). */
  async restore(owner: string, tokens: Int32Array, state: Buffer, answerFrom?: number): Promise<KvContext> {
    const c = new KvContext(`ctx_${this.nextId++}`, owner, '', Math.floor(Date.now() / 1000));
    await this.scheduler.exclusive(async () => {
      c.seq = await this.residency.allocSeq();
      const read = await this.residency.setState(c.seq, state, c);
      if (read !== state.length) {
        this.scheduler.freeSeqId(c.seq);
        // Cells taken by running requests: a wait, as for a full queue.
        if (read < 0) throw new ContextCapacityError();
        // llama.cpp reads a state it wrote to its last byte: bytes left over are not its state.
        throw new InvalidRequestError(read === 0 ? 'the snapshot state does not fit this model' : `corrupt context file: llama.cpp read ${read} of its KV state's ${state.length} bytes`);
      }
      c.tokens = tokens.slice();
      c.answerFrom = answerFrom !== undefined && answerFrom < tokens.length ? answerFrom : undefined;
      this.byId.set(c.id, c);
    });
    return c;
  }

  /** The context behind a named session, created on first use. */
  async session(name: string, owner: string): Promise<KvContext> {
    const byId = this.get(name, owner);
    if (byId) return byId;
    // An id that names no context (deleted, another caller's, not made yet) is a 404: as a new
    // session's name it was taken over, unreachable, once the next context got that id.
    if (CONTEXT_ID.test(name)) throw new ContextNotFoundError(name);
    const key = JSON.stringify([owner, name]);
    const named = this.byName.get(key);
    if (named) return named;
    const c = await this.create(owner, undefined);
    c.sessionKey = key;
    this.byName.set(key, c);
    return c;
  }

  /**
   * Binds a request to a context: the prompt must start with what the context
   * holds (a few trailing tokens may re-tokenize differently). Marks it busy
   * until the request ends. With dropDivergent, a prompt that departs from the
   * context keeps the common prefix and recomputes the rest (stored responses:
   * the template may render a past turn unlike the tokens the model sampled). `turnStart`: where
   * this prompt's answer (the model's own text) begins; a later prompt may depart from the
   * context past the first such start (KvContext.answerFrom).
   */
  async bind(c: KvContext, prompt: Int32Array, label: string, opts: { dropDivergent?: boolean; turnStart?: number } = {}): Promise<SessionBinding> {
    this.checkLive(c);
    if (c.busy) throw new ContextBusyError();
    let n = 0;
    while (n < c.tokens.length && n < prompt.length && c.tokens[n] === prompt[n]) n++;
    const slack = Math.min(RETOKENIZE_SLACK, Math.floor(c.tokens.length / 2));
    // A prompt may depart inside the model's own text, which the template renders again its own way.
    const departsInAnswer = c.answerFrom !== undefined && c.answerFrom <= n && prompt.length > n;
    if (!opts.dropDivergent && !departsInAnswer && (n < c.tokens.length - slack || (n < c.tokens.length && prompt.length <= n))) {
      throw new InvalidRequestError(`${label} holds ${c.tokens.length} tokens and the prompt diverges from it at token ${n}`);
    }
    c.busy = true;
    // Positions the scheduler keeps (resumeSession); lazy forks reading past them get their own sequence first.
    const kept = Math.max(0, Math.min(n, prompt.length - 1));
    try {
      await this.scheduler.exclusive(async () => {
        await this.residency.makeResident(c);
        await this.residency.detach(c, kept);
        // The cells past what the request keeps go with the tokens, now and in this section: a
        // request refused or abandoned before it runs (429, a cancel while queued) hands back the
        // cut tokens, and a snapshot or fork read while it runs must find one cell per token (the
        // scheduler decodes the last prompt token again: with the tokens at n, it read one cell
        // short until that step ran).
        if (kept < c.tokens.length) this.ctx.seqRemove(c.seq as number, kept, -1);
        c.tokens = c.tokens.slice(0, kept);
        await this.residency.trim();
      });
    } catch (err) {
      c.busy = false;
      throw err;
    }
    c.lastUsed = Date.now();
    return {
      seq: c.seq as number,
      held: c.tokens,
      onRelease: (held) => {
        c.tokens = held.slice();
        const before = c.answerFrom !== undefined && c.answerFrom <= kept ? c.answerFrom : undefined;
        const start = opts.turnStart === undefined ? undefined : Math.max(0, Math.min(opts.turnStart, c.tokens.length));
        c.answerFrom = before === undefined ? start : start === undefined ? before : Math.min(before, start);
        c.sharedWithParent = Math.min(c.sharedWithParent, n);
        c.busy = false;
        if (c.dropWhenIdle) void this.delete(c).catch(() => undefined);
      },
    };
  }

  /** Runs fn while the context is marked busy (409 for a second writer). */
  private async withContext<T>(c: KvContext, fn: () => Promise<T>): Promise<T> {
    this.checkLive(c);
    if (c.busy) throw new ContextBusyError();
    c.busy = true;
    c.lastUsed = Date.now();
    try {
      return await fn();
    } finally {
      c.busy = false;
    }
  }

  /** Found before a delete that ran meanwhile: acting on it would give a deleted context a sequence. */
  private checkLive(c: KvContext): void {
    if (this.byId.get(c.id) !== c) throw new ContextNotFoundError(c.id);
  }

  private async prefill(c: KvContext, tokens: Int32Array, signal?: AbortSignal, reserved?: boolean, answerFrom?: number): Promise<void> {
    const binding = await this.bind(c, tokens, c.id, { turnStart: answerFrom });
    const sampler = this.ctx.createSampler({ temperature: 0 });
    let events: AsyncIterable<unknown>;
    try {
      events = this.scheduler.submit({
        modelName: '',
        promptTokens: tokens,
        sampler,
        maxTokens: 0,
        stop: [],
        logprobs: 0,
        retainPrefix: false,
        session: binding,
        signal,
        reserved,
      });
    } catch (err) {
      // Refused before it ran (a model being unloaded): the context is free again, so the
      // caller's delete works (it failed as "in use", a 409 masking the refusal).
      sampler.dispose();
      binding.onRelease(binding.held, false);
      throw err;
    }
    for await (const _ of events) {
      // Prefill only: the single `done` event carries nothing we need.
    }
  }
}
