import { Logger } from '@nestjs/common';
import { CatalogEntry, ModelCatalog } from '../../../store/src/catalog';
import { InferenceBackend } from '../backend/inference-backend';
import { InvalidRequestError } from '../core/errors';
import { EngineConfig } from '../engine-config';
import { Scheduler } from '../scheduler/scheduler';
import { sha256File } from './file-hash';
import { LoadedModel } from './loaded-model';

/** Per-request positions when the flag leaves it open. */
const DEFAULT_CTX_CAP = 4096;

/**
 * Keeps one loaded copy of each model, shared by every route and dialect.
 * Concurrent first requests for the same model share one load.
 */
export class ModelManager {
  private readonly log = new Logger('models');
  private readonly loaded = new Map<string, Promise<LoadedModel>>();
  private readonly loadListeners: Array<(m: LoadedModel) => void> = [];

  constructor(
    private readonly backend: InferenceBackend,
    readonly catalog: ModelCatalog,
    private readonly config: EngineConfig,
  ) {}

  /** Resolves a request's model name ('' = default) and loads it if needed. */
  async acquire(name: string): Promise<LoadedModel> {
    const entry = this.catalog.resolve(name);
    let p = this.loaded.get(entry.path);
    if (!p) {
      p = this.load(entry);
      this.loaded.set(entry.path, p);
      p.catch(() => this.loaded.delete(entry.path));
    }
    const lm = await p;
    lm.lastUsed = Date.now();
    return lm;
  }

  /** Called for every model once it is loaded (metrics hook in here). */
  onLoaded(fn: (m: LoadedModel) => void): void {
    this.loadListeners.push(fn);
  }

  /** Models already resident (for /api/ps, health, metrics). */
  async resident(): Promise<LoadedModel[]> {
    const all = await Promise.allSettled(this.loaded.values());
    return all.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  }

  /** Finishes running generations, then frees every context and model. */
  async close(): Promise<void> {
    const models = await this.resident();
    await Promise.all(models.map((m) => m.scheduler.drain()));
    for (const m of models) {
      m.ctx.dispose();
      m.native.dispose();
    }
    this.loaded.clear();
  }

  private async load(entry: CatalogEntry): Promise<LoadedModel> {
    if (entry.capabilities.length === 0) {
      throw new InvalidRequestError(`${entry.name} is not a model this server can run (no text capabilities)`);
    }
    const started = performance.now();
    const [native, hash] = await Promise.all([
      this.backend.loadModel(entry.path, { nGpuLayers: this.config.gpuLayers }),
      sha256File(entry.path),
    ]);
    const c = this.config;
    const nCtxSeq = Math.min(native.info.nCtxTrain || DEFAULT_CTX_CAP, c.ctxSize > 0 ? c.ctxSize : DEFAULT_CTX_CAP);
    const nSeqMax = Math.min(256, c.concurrency + c.cacheSlots);
    // Room for every active sequence at full length; retained prompts use what is left.
    const ctx = await native.createContext({
      nCtx: nCtxSeq * c.concurrency,
      nBatch: c.batchSize,
      nUbatch: c.batchSize,
      nSeqMax,
      nThreads: c.threads,
      nThreadsBatch: c.threadsBatch,
      flashAttn: c.flashAttn,
    });
    const scheduler = new Scheduler(native, ctx, {
      concurrency: c.concurrency,
      queueLimit: c.queueLimit,
      nBatch: c.batchSize,
      nCtxSeq,
      cacheSlots: c.cacheSlots,
      cachePositions: Math.max(nCtxSeq, Math.floor((nCtxSeq * c.concurrency) / 2)),
    });
    const ms = performance.now() - started;
    this.log.log(`loaded ${entry.name} (${native.info.description}) on ${this.backend.name} in ${ms.toFixed(0)} ms; ${nCtxSeq} positions per request`);
    const lm = new LoadedModel(entry, native, ctx, scheduler, hash, ms, new Date());
    for (const fn of this.loadListeners) fn(lm);
    return lm;
  }
}
