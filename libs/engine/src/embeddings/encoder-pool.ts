import { Logger } from '@nestjs/common';
import { CatalogEntry, ModelCatalog } from '../../../store/src/catalog';
import { InferenceBackend } from '../backend/inference-backend';
import { NativeEmbedder, NativeModel } from '../backend/native-addon';
import { ClientGoneError, QueueFullError, ServerShuttingDownError } from '../core/errors';
import { EngineConfig } from '../engine-config';
import { sha256File } from '../models/file-hash';
import { parseKeepAlive } from '../models/residency';
import { EncoderNames } from './encoder-names';
import { holding } from '../models/holds';

/** Longest input an encoder reads when its training context says more (a batch holds a whole input). */
const MAX_ENCODER_CTX = 8192;
/** Inputs one native batch holds. */
const SEQS_PER_BATCH = 64;

/** What a route wants of an encoder: vectors, or a cross-encoder's pair scores. */
export type EncoderUse = 'embed' | 'rank';

/** What one native call takes from the waiting requests: a longer request goes in several calls, others' between them. */
const INPUTS_PER_CALL = 256;
const TOKENS_PER_CALL = 32_768;

interface Waiting {
  inputs: Int32Array[];
  out: Float32Array[];
  /** Inputs done, and in the call running. */
  done: number;
  taken: number;
  signal?: AbortSignal;
  resolve: (v: Float32Array[]) => void;
  reject: (e: unknown) => void;
}

/**
 * One encoder's weights and embedding context. Requests that arrive while a native call runs
 * wait, and go together in the next one (as llama-server batches its slots: one call per
 * request served 8 concurrent clients at a sixth of the rate); a request of more than
 * INPUTS_PER_CALL inputs goes in several calls, and stops between them when its client leaves.
 */
export class Encoder {
  private readonly waiting: Waiting[] = [];
  private running?: Promise<void>;
  private closed = false;
  /** When keep_alive runs out (undefined: never); renewed by every use. */
  expiresAt?: Date;
  /** keep_alive in ms, as the last request that set one asked (Infinity: forever). */
  keepAliveMs = Infinity;
  lastUsed = Date.now();
  /** What /v1/stats shows for an encoder. */
  readonly stats = { requests: 0, inputs: 0, tokens: 0, calls: 0, rejected: 0, cancelled: 0, computeMs: 0 };

  constructor(
    readonly entry: CatalogEntry,
    readonly native: NativeModel,
    readonly embedder: NativeEmbedder,
    /** sha256 of the file: identifies the weights, as a generating model's. */
    readonly contentHash: string,
    readonly loadMs: number,
    readonly loadedAt: Date,
    /** Requests that may wait at once (-concurrency plus -queue); past it, 429. */
    private readonly maxWaiting: number,
  ) {}

  get name(): string {
    return this.entry.name;
  }

  /** Unit-length vectors (a cross-encoder's: one score each), one per token list. */
  embed(inputs: Int32Array[], signal?: AbortSignal): Promise<Float32Array[]> {
    if (this.closed) return Promise.reject(new ServerShuttingDownError());
    if (inputs.length === 0) return Promise.resolve([]);
    if (this.waiting.length >= this.maxWaiting) {
      this.stats.rejected++;
      return Promise.reject(new QueueFullError());
    }
    this.stats.requests++;
    this.stats.inputs += inputs.length;
    for (const t of inputs) this.stats.tokens += t.length;
    return new Promise((resolve, reject) => {
      this.waiting.push({ inputs, out: [], done: 0, taken: 0, signal, resolve, reject });
      this.next();
    });
  }

  /** Requests that acquired this encoder and have not finished with it (tokenizing, waiting, computing). */
  holds = 0;

  /** Runs fn with the encoder held: busy all along, and its keep_alive counted from the end. */
  async held<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await holding(this, fn);
    } finally {
      if (this.expiresAt) this.expiresAt = new Date(this.lastUsed + this.keepAliveMs);
    }
  }

  /** Requests held, waiting or computing. */
  get busy(): boolean {
    return this.holds > 0 || this.waiting.length > 0 || this.running !== undefined;
  }

  /** Waits for the calls queued, then frees the context and the weights; later calls are 503s. */
  async dispose(): Promise<void> {
    this.closed = true;
    while (this.running) await this.running;
    this.embedder.dispose();
    this.native.dispose();
  }

  /** Starts a native call for the requests waiting, unless one runs. */
  private next(): void {
    if (this.running) return;
    // A request whose client left is dropped before its next inputs are computed.
    for (let k = this.waiting.length - 1; k >= 0; k--) {
      if (!this.waiting[k].signal?.aborted) continue;
      this.stats.cancelled++;
      this.waiting.splice(k, 1)[0].reject(new ClientGoneError());
    }
    const group: Waiting[] = [];
    const inputs: Int32Array[] = [];
    let tokens = 0;
    for (const w of this.waiting) {
      w.taken = 0;
      // Up to the call's inputs and tokens (one input at least, whatever its length).
      while (w.done + w.taken < w.inputs.length && inputs.length < INPUTS_PER_CALL) {
        const t = w.inputs[w.done + w.taken];
        if (inputs.length > 0 && tokens + t.length > TOKENS_PER_CALL) break;
        inputs.push(t);
        tokens += t.length;
        w.taken++;
      }
      if (w.taken > 0) group.push(w);
      if (inputs.length >= INPUTS_PER_CALL || tokens >= TOKENS_PER_CALL) break;
    }
    if (group.length === 0) return;
    const started = performance.now();
    this.stats.calls++;
    let call: Promise<Float32Array[]>;
    try {
      call = this.embedder.embed(inputs);
    } catch (err) {
      call = Promise.reject(err); // refused at once (disposed, busy): the group's requests fail, not hang
    }
    this.running = call
      .then(
        (vectors) => {
          let at = 0;
          for (const w of group) {
            w.out.push(...vectors.slice(at, at + w.taken));
            at += w.taken;
            w.done += w.taken;
            if (w.done === w.inputs.length) this.settle(w, () => w.resolve(w.out));
            else this.toBack(w); // a long request takes turns with those behind it
          }
        },
        (err) => group.forEach((w) => this.settle(w, () => w.reject(err))),
      )
      .finally(() => {
        this.stats.computeMs += performance.now() - started;
        this.running = undefined;
        this.next();
      });
  }

  private toBack(w: Waiting): void {
    const k = this.waiting.indexOf(w);
    if (k >= 0) this.waiting.push(...this.waiting.splice(k, 1));
  }

  private settle(w: Waiting, fn: () => void): void {
    const k = this.waiting.indexOf(w);
    if (k >= 0) this.waiting.splice(k, 1);
    fn();
  }
}

/** A use this recent counts as running: covers the gap between acquire() and embed(). */
const IN_USE_GRACE_MS = 1000;
const REAP_EVERY_MS = 500;

/**
 * The encoders the server has loaded, by file: loaded on first use, kept per keep_alive as the
 * generating models are (the flags' encoders stay until a request sets one; others get
 * -keep-alive), and unloaded once idle past it. Apart from the generating models' ModelManager,
 * as an encoder has no KV cache, scheduler or contexts.
 */
export class EncoderPool {
  private readonly log = new Logger('encoders');
  private readonly loaded = new Map<string, Promise<Encoder>>();
  private closing = false;
  private readonly reaper: NodeJS.Timeout;
  private readonly names: EncoderNames;

  constructor(
    private readonly backend: InferenceBackend,
    catalog: ModelCatalog,
    private readonly config: EngineConfig,
  ) {
    this.names = new EncoderNames(catalog);
    this.reaper = setInterval(() => void this.reapExpired(), REAP_EVERY_MS);
    this.reaper.unref();
  }

  /** The encoder a request names for a use (EncoderNames), loaded if it is not. */
  async acquire(name: string, use: EncoderUse = 'embed', opts?: { keepAlive?: number | string | null }): Promise<{ encoder: Encoder; name: string; fresh: boolean }> {
    if (this.closing) throw new ServerShuttingDownError();
    const entry = use === 'rank' ? this.names.forRerank(name) : this.names.forEmbedding(name);
    let p = this.loaded.get(entry.path);
    const fresh = !p;
    if (!p) {
      p = this.load(entry);
      this.loaded.set(entry.path, p);
      p.catch(() => this.loaded.delete(entry.path));
    }
    const encoder = await p;
    // A local-runner request sets keep_alive (none sent: -keep-alive), as for a generating model;
    // /v1 renews the last one set; a fresh load of an encoder no flag names gets -keep-alive.
    const asked = opts?.keepAlive;
    if (opts) encoder.keepAliveMs = asked === undefined || asked === null || asked === '' ? this.config.keepAliveMs : parseKeepAlive(asked);
    else if (fresh && !this.names.flagged(entry)) encoder.keepAliveMs = this.config.keepAliveMs;
    encoder.lastUsed = Date.now();
    encoder.expiresAt = encoder.keepAliveMs === Infinity ? undefined : new Date(encoder.lastUsed + encoder.keepAliveMs);
    return { encoder, name: entry.name, fresh };
  }

  /**
   * keep_alive 0 without input (the local runner's unload, `ollama stop`): a loaded encoder
   * expires (the reaper frees it once idle); one not loaded stays so.
   */
  async expire(entry: CatalogEntry): Promise<void> {
    const enc = await this.loaded.get(entry.path)?.catch(() => undefined);
    if (!enc) return;
    enc.keepAliveMs = 0;
    enc.expiresAt = new Date();
  }

  /** Unloads encoders idle past their keep_alive. */
  private async reapExpired(): Promise<void> {
    const now = Date.now();
    for (const [path, p] of this.loaded) {
      const enc = await p.catch(() => undefined);
      if (!enc || !enc.expiresAt || enc.expiresAt.getTime() > now || enc.busy || now - enc.lastUsed < IN_USE_GRACE_MS) continue;
      if (this.loaded.get(path) !== p) continue;
      this.loaded.delete(path);
      this.log.log(`unloaded encoder ${enc.name} (keep_alive ran out)`);
      await enc.dispose();
    }
  }

  /** Encoders resident now (for /api/ps). */
  async resident(): Promise<Encoder[]> {
    const all = await Promise.allSettled([...this.loaded.values()]);
    return all.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  }

  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.reaper);
    for (const e of await this.resident()) await e.dispose();
    this.loaded.clear();
  }

  private async load(entry: CatalogEntry): Promise<Encoder> {
    const started = performance.now();
    const c = this.config;
    const [loaded, hashed] = await Promise.allSettled([this.backend.loadModel(entry.path, { nGpuLayers: c.gpuLayers }), sha256File(entry.path)]);
    if (loaded.status === 'rejected') throw loaded.reason;
    const native = loaded.value;
    try {
      if (hashed.status === 'rejected') throw hashed.reason;
      const nCtx = Math.min(native.info.nCtxTrain || 512, c.ctxSize > 0 ? c.ctxSize : MAX_ENCODER_CTX);
      const embedder = await native.createEmbedder({ nCtx, nSeqMax: SEQS_PER_BATCH, nThreads: c.threadsBatch });
      const ms = performance.now() - started;
      const what = embedder.pooling === 'rank' ? 'reranker' : 'encoder';
      this.log.log(`loaded ${what} ${entry.name} (${native.info.description}) on ${this.backend.name} in ${ms.toFixed(0)} ms; ${embedder.nEmbd} dimensions, ${embedder.pooling} pooling, inputs up to ${embedder.nCtx} tokens`);
      return new Encoder(entry, native, embedder, hashed.value, ms, new Date(), c.concurrency + c.queueLimit);
    } catch (err) {
      native.dispose();
      throw err;
    }
  }
}
