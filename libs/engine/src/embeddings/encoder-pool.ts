import { Logger } from '@nestjs/common';
import { CatalogEntry, isEncoderEntry, isRerankerEntry, ModelCatalog } from '../../../store/src/catalog';
import { InferenceBackend } from '../backend/inference-backend';
import { NativeEmbedder, NativeModel } from '../backend/native-addon';
import { InvalidRequestError, ServerShuttingDownError } from '../core/errors';
import { EngineConfig } from '../engine-config';
import { sha256File } from '../models/file-hash';

/** Longest input an encoder reads when its training context says more (a batch holds a whole input). */
const MAX_ENCODER_CTX = 8192;
/** Inputs one native batch holds. */
const SEQS_PER_BATCH = 64;

/** What a route wants of an encoder: vectors, or a cross-encoder's pair scores. */
export type EncoderUse = 'embed' | 'rank';

/** Inputs one native call takes from the waiting requests (a request with more still goes whole). */
const INPUTS_PER_CALL = 256;

interface Waiting {
  inputs: Int32Array[];
  resolve: (v: Float32Array[]) => void;
  reject: (e: unknown) => void;
}

/**
 * One encoder's weights and embedding context. Requests that arrive while a native call runs
 * wait, and go together in the next one (as llama-server batches its slots): one short input
 * a call cost 8 concurrent clients 6× the throughput of one call for all of them.
 */
export class Encoder {
  private readonly waiting: Waiting[] = [];
  private running?: Promise<void>;

  constructor(
    readonly entry: CatalogEntry,
    readonly native: NativeModel,
    readonly embedder: NativeEmbedder,
    /** sha256 of the file: identifies the weights, as a generating model's. */
    readonly contentHash: string,
    readonly loadMs: number,
    readonly loadedAt: Date,
  ) {}

  get name(): string {
    return this.entry.name;
  }

  /** Unit-length vectors (a cross-encoder's: one score each), one per token list. */
  embed(inputs: Int32Array[]): Promise<Float32Array[]> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ inputs, resolve, reject });
      this.next();
    });
  }

  /** Waits for the calls queued, then frees the context and the weights. */
  async dispose(): Promise<void> {
    while (this.running) await this.running;
    this.embedder.dispose();
    this.native.dispose();
  }

  /** Starts a native call for the requests waiting, unless one runs. */
  private next(): void {
    if (this.running || this.waiting.length === 0) return;
    let n = 0;
    let take = 0;
    while (take < this.waiting.length && (take === 0 || n + this.waiting[take].inputs.length <= INPUTS_PER_CALL)) n += this.waiting[take++].inputs.length;
    const group = this.waiting.splice(0, take);
    this.running = this.embedder.embed(group.flatMap((w) => w.inputs)).then(
      (vectors) => {
        let at = 0;
        for (const w of group) {
          w.resolve(vectors.slice(at, at + w.inputs.length));
          at += w.inputs.length;
        }
      },
      (err) => group.forEach((w) => w.reject(err)),
    ).finally(() => {
      this.running = undefined;
      this.next();
    });
  }
}

/**
 * The encoders the server has loaded, by file: loaded on first use and kept (they are small,
 * and answer in milliseconds once resident). Apart from the generating models' ModelManager,
 * as an encoder has no KV cache, scheduler or contexts.
 */
export class EncoderPool {
  private readonly log = new Logger('encoders');
  private readonly loaded = new Map<string, Promise<Encoder>>();
  private closing = false;

  constructor(
    private readonly backend: InferenceBackend,
    private readonly catalog: ModelCatalog,
    private readonly config: EngineConfig,
  ) {}

  /**
   * The encoder a request names for a use: '' is the flag's (-embed, -rerank), else the default
   * model when it is one, else the first listed. A name must be one for that use; another
   * model's is refused naming one there is.
   */
  async acquire(name: string, use: EncoderUse = 'embed'): Promise<{ encoder: Encoder; name: string; fresh: boolean }> {
    if (this.closing) throw new ServerShuttingDownError();
    const entry = use === 'rank' ? this.resolveReranker(name) : this.resolve(name);
    let p = this.loaded.get(entry.path);
    const fresh = !p;
    if (!p) {
      p = this.load(entry);
      this.loaded.set(entry.path, p);
      p.catch(() => this.loaded.delete(entry.path));
    }
    return { encoder: await p, name: entry.name, fresh };
  }

  /** Encoders resident now (for /api/ps). */
  async resident(): Promise<Encoder[]> {
    const all = await Promise.allSettled([...this.loaded.values()]);
    return all.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  }

  async close(): Promise<void> {
    this.closing = true;
    for (const e of await this.resident()) await e.dispose();
    this.loaded.clear();
  }

  private resolve(name: string): CatalogEntry {
    const encName = this.catalog.encoderName();
    if (name === '') {
      if (encName !== undefined) return this.catalog.resolve(encName);
      const def = this.catalog.resolve('', { generating: true });
      if (isVectorEncoder(def)) return def;
      const any = this.firstListed(isVectorEncoder);
      if (any) return any;
      throw noEncoder(def.name);
    }
    const entry = this.catalog.resolve(name, { generating: true });
    if (isVectorEncoder(entry)) return entry;
    if (isRerankerEntry(entry)) throw new InvalidRequestError(`${entry.name} is a cross-encoder (a reranker): it scores pairs and writes no embeddings`);
    const enc = encName ?? this.firstListed(isVectorEncoder)?.name;
    if (enc !== undefined) throw new InvalidRequestError(`${entry.name} is a decoder and cannot embed; this server's encoder is ${enc}`);
    throw noEncoder(entry.name);
  }

  private resolveReranker(name: string): CatalogEntry {
    const flag = this.catalog.rerankerName();
    if (name === '') {
      if (flag !== undefined) return this.catalog.resolve(flag);
      const def = this.catalog.resolve('', { generating: true });
      const any = isRerankerEntry(def) ? def : this.firstListed(isRerankerEntry);
      if (any) return any;
      throw new InvalidRequestError('this server has no reranker: start it with -rerank <model>');
    }
    const entry = this.catalog.resolve(name, { generating: true });
    if (isRerankerEntry(entry)) return entry;
    const rr = flag ?? this.firstListed(isRerankerEntry)?.name;
    throw new InvalidRequestError(`${entry.name} is not a reranker (a cross-encoder)${rr !== undefined ? `; this server's reranker is ${rr}` : ''}`);
  }

  private firstListed(test: (e: CatalogEntry) => boolean): CatalogEntry | undefined {
    return this.catalog.list().find(test);
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
      return new Encoder(entry, native, embedder, hashed.value, ms, new Date());
    } catch (err) {
      native.dispose();
      throw err;
    }
  }
}

/** An encoder that writes vectors (a cross-encoder writes pair scores). */
function isVectorEncoder(e: CatalogEntry): boolean {
  return isEncoderEntry(e) && !isRerankerEntry(e);
}

function noEncoder(decoder: string): Error {
  return new InvalidRequestError(`this server is serving ${decoder}, a decoder, and has no encoder loaded`);
}
