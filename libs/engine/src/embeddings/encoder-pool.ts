import { Logger } from '@nestjs/common';
import { CatalogEntry, isEncoderEntry, ModelCatalog } from '../../../store/src/catalog';
import { InferenceBackend } from '../backend/inference-backend';
import { NativeEmbedder, NativeModel } from '../backend/native-addon';
import { InvalidRequestError, ServerShuttingDownError } from '../core/errors';
import { EngineConfig } from '../engine-config';
import { sha256File } from '../models/file-hash';

/** Longest input an encoder reads when its training context says more (a batch holds a whole input). */
const MAX_ENCODER_CTX = 8192;
/** Inputs one native batch holds. */
const SEQS_PER_BATCH = 64;

/** One encoder's weights and embedding context; its embed() calls run one at a time. */
export class Encoder {
  private tail: Promise<unknown> = Promise.resolve();

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

  /** Unit-length vectors, one per token list; queued behind the calls before it. */
  embed(inputs: Int32Array[]): Promise<Float32Array[]> {
    const run = this.tail.then(() => this.embedder.embed(inputs));
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Waits for queued calls, then frees the context and the weights. */
  async dispose(): Promise<void> {
    await this.tail;
    this.embedder.dispose();
    this.native.dispose();
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
   * The encoder a request names: '' is -embed's encoder, else the default model when it is
   * one, else the first encoder listed. A name must be an encoder's; a decoder's is refused
   * naming an encoder there is.
   */
  async acquire(name: string): Promise<{ encoder: Encoder; name: string; fresh: boolean }> {
    if (this.closing) throw new ServerShuttingDownError();
    const entry = this.resolve(name);
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
      if (isEncoderEntry(def)) return def;
      const any = this.anyEncoder();
      if (any) return any;
      throw noEncoder(def.name);
    }
    const entry = this.catalog.resolve(name, { generating: true });
    if (isEncoderEntry(entry)) return entry;
    const enc = encName ?? this.anyEncoder()?.name;
    if (enc !== undefined) throw new InvalidRequestError(`${entry.name} is a decoder and cannot embed; this server's encoder is ${enc}`);
    throw noEncoder(entry.name);
  }

  private anyEncoder(): CatalogEntry | undefined {
    return this.catalog.list().find((e) => isEncoderEntry(e));
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
      if (embedder.pooling === 'rank') {
        embedder.dispose();
        throw new InvalidRequestError(`${entry.name} is a cross-encoder (a reranker): it scores pairs and writes no embeddings`);
      }
      const ms = performance.now() - started;
      this.log.log(`loaded encoder ${entry.name} (${native.info.description}) on ${this.backend.name} in ${ms.toFixed(0)} ms; ${embedder.nEmbd} dimensions, ${embedder.pooling} pooling, inputs up to ${embedder.nCtx} tokens`);
      return new Encoder(entry, native, embedder, hashed.value, ms, new Date());
    } catch (err) {
      native.dispose();
      throw err;
    }
  }
}

function noEncoder(decoder: string): Error {
  return new InvalidRequestError(`this server is serving ${decoder}, a decoder, and has no encoder loaded`);
}
