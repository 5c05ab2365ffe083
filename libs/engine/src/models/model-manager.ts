import { Logger } from '@nestjs/common';
import { rmSync } from 'node:fs';
import { CatalogEntry, isEncoderEntry, ModelCatalog } from '../../../store/src/catalog';
import { InferenceBackend } from '../backend/inference-backend';
import { InvalidRequestError, ModelNotFoundError, ServerShuttingDownError } from '../core/errors';
import { EngineConfig } from '../engine-config';
import { KeptContexts, removeDeadSpills, spillRoot } from './kept-contexts';
import { LoadedModel } from './loaded-model';
import { DEFAULT_CTX_CAP, loadModel } from './model-loader';
import { defaultMemoryBudget, estimateBytes, parseKeepAlive, seqPositions } from './residency';

export interface AcquireOptions {
  /** keep_alive as the request sent it ("5m", seconds, 0, -1); absent/undefined means -keep-alive (5m). */
  keepAlive?: number | string | null;
  /** The server's default model (boot, or the first pulled): stays until memory is needed or a keep_alive is set. */
  stay?: boolean;
}

/** A model acquired this recently counts as in use: covers the gap between acquire() and scheduler.submit(). */
const IN_USE_GRACE_MS = 1000;
const REAP_EVERY_MS = 500;
/** How often a retired model is checked for its last request's end. */
const IDLE_POLL_MS = 50;
/** Loads of a name that failed because a store change took its file away, asked again before the error stands. */
const MAX_RETIRED_RETRIES = 3;
/** How long a load waits for busy models to go idle before loading over budget. */
const FIT_WAIT_MS = 60_000;

/**
 * Keeps one loaded copy of each model, shared by every route and dialect.
 * Concurrent first requests for the same model share one load. Models stay
 * resident per keep_alive and are unloaded least-recently-used when a new one
 * would not fit the memory budget; a model with running or queued requests is
 * never unloaded. An unloaded model's contexts wait on disk for its next load.
 */
export class ModelManager {
  private readonly log = new Logger('models');
  private readonly loaded = new Map<string, Promise<LoadedModel>>();
  /** The loaded ones only (a pending load is not counted, and never awaited, when making room). */
  private readonly ready = new Map<string, LoadedModel>();
  private readonly loadListeners: Array<(m: LoadedModel) => void> = [];
  /** Loads run one at a time, so two never both decide they fit. */
  private loadChain: Promise<unknown> = Promise.resolve();
  private readonly reaper: NodeJS.Timeout;
  private readonly kept = new KeptContexts();
  /** Unloads still writing their contexts to disk: a new load of the same file waits for them. */
  private readonly unloading = new Map<string, Promise<void>>();
  /** Models out of service but not freed yet (finishing their requests, writing contexts): they still hold memory. */
  private readonly leaving = new Set<LoadedModel>();
  /** close() began: the whole server is stopping (not one model being retired). */
  closing = false;

  constructor(
    private readonly backend: InferenceBackend,
    readonly catalog: ModelCatalog,
    private readonly config: EngineConfig,
  ) {
    this.reaper = setInterval(() => void this.reapExpired(), REAP_EVERY_MS);
    this.reaper.unref();
    removeDeadSpills();
  }

  /** Bytes resident models may take together. */
  get memoryBudget(): number {
    return this.config.memoryBudget > 0 ? this.config.memoryBudget : defaultMemoryBudget();
  }

  /**
   * Resolves a request's model name ('' = default) and loads it if needed.
   * Without `opts` (/v1 and context routes) the last keep-alive set is renewed, and a
   * fresh load gets -keep-alive; the local runner passes `{ keepAlive }`, the default
   * model's load `{ stay: true }`.
   */
  async acquire(name: string, opts?: AcquireOptions): Promise<LoadedModel> {
    return (await this.acquireNamed(name, opts)).lm;
  }

  /** acquire(), with the name the request answers to (two names of one file share the load), resolved once. */
  acquireNamed(name: string, opts?: AcquireOptions): Promise<{ lm: LoadedModel; name: string; entry: CatalogEntry }> {
    return this.acquireTry(name, opts, 0);
  }

  private async acquireTry(name: string, opts: AcquireOptions | undefined, retired: number): Promise<{ lm: LoadedModel; name: string; entry: CatalogEntry }> {
    // After close() nothing would free a new load.
    if (this.closing) throw new ServerShuttingDownError();
    const entry = this.catalog.resolve(name, { generating: true });
    // Encoders are the EncoderPool's: they have no KV cache to generate with.
    if (isEncoderEntry(entry)) throw new InvalidRequestError(`${entry.name} is an encoder and cannot generate text`);
    // A local-runner request without keep_alive sets the default, as the local runner does.
    const asked = opts?.keepAlive;
    const keepMs = !opts ? undefined : opts.stay ? Infinity : asked === undefined || asked === null || asked === '' ? this.config.keepAliveMs : parseKeepAlive(asked);
    let p = this.loaded.get(entry.path);
    if (!p) {
      p = this.serialLoad(entry);
      this.loaded.set(entry.path, p);
      p.catch(() => this.loaded.delete(entry.path));
    }
    let lm: LoadedModel;
    try {
      lm = await p;
    } catch (err) {
      // A delete, copy or pull took the file out of the store while this load waited (or ran):
      // the name is asked again, so the caller gets 404 or the weights it names now, never the
      // vanished blob's ENOENT.
      // Bounded: a -m file deleted behind the server's back resolves from a cache for a moment.
      if (!this.isListed(entry.path) && retired < MAX_RETIRED_RETRIES) return this.acquireTry(name, opts, retired + 1);
      throw err;
    }
    // Unloaded (memory, keep_alive, delete) between the load and now: load again.
    // unload() removes the promise from `loaded`, so this cannot spin on a live model.
    if (this.loaded.get(entry.path) !== p) return this.acquireTry(name, opts, retired);
    lm.lastUsed = Date.now();
    if (keepMs !== undefined) lm.keepAliveMs = keepMs;
    // Any use renews the last keep_alive asked for (a local-runner request set it; /v1 and contexts use the model too).
    lm.expiresAt = lm.keepAliveMs === Infinity ? undefined : new Date(lm.lastUsed + lm.keepAliveMs);
    return { lm, name: entry.name, entry };
  }

  /**
   * keep_alive 0 without a prompt (the local runner's unload): a loaded model expires, one not
   * loaded stays so (loading gigabytes only to free them). Returns the model's entry (an encoder's is
   * the EncoderPool's to expire).
   */
  async expire(name: string): Promise<CatalogEntry> {
    const entry = this.catalog.resolve(name, { generating: true });
    if (this.loaded.has(entry.path)) await this.acquire(name, { keepAlive: 0 });
    return entry;
  }

  /**
   * Takes the files no listed name refers to any more (after a delete, copy or pull) out of
   * service now: no new request reaches them and /api/ps stops listing them. Their running
   * requests finish first, then they and their contexts are freed, in the background (the
   * store's answer does not wait for a long generation). Contexts kept on disk from an earlier
   * unload of an unlisted file go too. `gone`: files just deleted. A file still loading is
   * handled when its load ends.
   */
  retireUnlisted(gone: string[] = []): void {
    const listed = new Set(this.catalog.list().map((e) => e.path));
    // Kept contexts of every unlisted file go, not only of deleted ones: a copy over a name also
    // leaves weights named by nothing, and their contexts came back when the same file returned.
    const paths = new Set([...gone, ...this.ready.keys(), ...this.unloading.keys(), ...this.kept.paths()].filter((p) => !listed.has(p)));
    for (const path of paths) {
      const lm = this.ready.get(path);
      // A keep_alive unload still writing this file's contexts to disk is waited for, then they go.
      const done = lm ? this.unload(lm, false, true) : (this.unloading.get(path) ?? Promise.resolve());
      done
        .catch(() => undefined)
        .then(() => this.kept.discard(path))
        .catch((err: Error) => this.log.warn(`could not remove the kept contexts of ${path}: ${err.message}`));
    }
    for (const [path, p] of this.loaded) {
      if (!this.ready.has(path) && !listed.has(path)) void p.then(() => this.retireUnlisted(), () => undefined);
    }
  }

  /** Frees a hidden context (a stored response's): now if its model is loaded, else when it loads again. */
  async releaseContext(weights: string, id: string, owner: string): Promise<void> {
    // Only this file's own unload or load is waited for: another model's load may wait a minute for memory.
    await this.unloading.get(weights)?.catch(() => undefined);
    await this.loaded.get(weights)?.catch(() => undefined);
    const lm = this.ready.get(weights);
    const c = lm?.contexts.get(id, owner, true);
    // A stream cut short still holds it until the scheduler's next step.
    if (lm && c) await lm.contexts.release(c);
    else if (!lm) this.kept.dropLater(weights, id, owner);
  }

  /** Called for every model once it is loaded (metrics hook in here). */
  onLoaded(fn: (m: LoadedModel) => void): void {
    this.loadListeners.push(fn);
  }

  /**
   * Models loaded and in service now (for /api/ps, health, metrics): never waits for a load in
   * progress (one waiting for memory would hold every listing up), and never lists one being
   * unloaded.
   */
  resident(): LoadedModel[] {
    return [...this.ready.values()];
  }

  /**
   * The name a loaded model goes by in listings: the one it was loaded under while that still
   * names its file, else another name of that file (a delete of the first of two names).
   */
  listedName(lm: Pick<LoadedModel, 'entry' | 'name'>): string {
    const names = this.catalog.list().filter((e) => e.path === lm.entry.path).map((e) => e.name);
    return names.includes(lm.name) ? lm.name : (names[0] ?? lm.name);
  }

  /** A former default model (stay) whose weights another name still lists: -keep-alive from now, as a model any request loaded. */
  endStay(lm: LoadedModel): void {
    if (lm.keepAliveMs !== Infinity) return;
    lm.keepAliveMs = this.config.keepAliveMs;
    lm.expiresAt = lm.keepAliveMs === Infinity ? undefined : new Date(Date.now() + lm.keepAliveMs);
  }

  /** Whether `lm` still serves requests: false once it is unloaded or being unloaded. */
  inService(lm: LoadedModel): boolean {
    return this.ready.get(lm.entry.path) === lm;
  }

  /** Finishes running generations, then frees every context and model. */
  async close(): Promise<void> {
    clearInterval(this.reaper);
    this.closing = true;
    await Promise.allSettled(this.unloading.values());
    const models = (await Promise.allSettled(this.loaded.values())).flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    await Promise.all(models.map((m) => m.scheduler.drain()));
    for (const m of models) {
      m.contexts.dispose();
      m.ctx.dispose();
      m.projector?.dispose();
      m.native.dispose();
    }
    rmSync(spillRoot(), { recursive: true, force: true });
    this.loaded.clear();
    this.ready.clear();
  }

  private isListed(path: string): boolean {
    return this.catalog.list().some((e) => e.path === path);
  }

  private busy(lm: LoadedModel): boolean {
    return lm.holds > 0 || lm.scheduler.activeCount + lm.scheduler.queued > 0 || Date.now() - lm.lastUsed < IN_USE_GRACE_MS;
  }

  /** Frees a loaded model; its contexts go to disk for its next load unless the file itself is going. */
  private unload(lm: LoadedModel | undefined, keepContexts = true, whenIdle = false): Promise<void> {
    if (!lm || this.ready.get(lm.entry.path) !== lm) return Promise.resolve();
    const path = lm.entry.path;
    this.ready.delete(path);
    this.loaded.delete(path);
    // A retired model is out of service at once, but requests that acquired it just before
    // (between acquire and submit, or making a context) finish on it before it is freed.
    const done = (whenIdle ? this.idle(lm) : Promise.resolve()).then(() => this.release(lm, keepContexts));
    this.leaving.add(lm);
    void done.finally(() => this.leaving.delete(lm)).catch(() => undefined);
    this.unloading.set(path, done);
    const settled = () => void (this.unloading.get(path) === done && this.unloading.delete(path));
    done.then(settled, settled);
    return done;
  }

  /** Resolves once nothing runs or waits on `lm` and its last acquire is past the grace. */
  private async idle(lm: LoadedModel): Promise<void> {
    while (this.busy(lm) && !this.closing) await new Promise((r) => setTimeout(r, IDLE_POLL_MS));
  }

  private async release(lm: LoadedModel, keepContexts: boolean): Promise<void> {
    await lm.scheduler.drain(); // new submits are refused; running ones finish
    this.kept.noteIds(lm.entry.path, lm.contexts.nextContextId);
    if (keepContexts) {
      try {
        this.kept.keep(lm.entry.path, lm.name, await lm.contexts.suspend());
      } catch (err) {
        this.log.warn(`could not write the contexts of ${lm.name} to disk (${(err as Error).message}): they are dropped`);
        lm.contexts.dispose();
      }
    } else {
      lm.contexts.dispose();
    }
    lm.ctx.dispose();
    lm.projector?.dispose();
    lm.native.dispose();
    this.log.log(`unloaded ${lm.name}`);
  }

  /**
   * keep_alive: expired idle models go. It counts from the end of the last request, as the
   * local runner's does: a busy model's expiry stays keep_alive past now (a generation longer
   * than keep_alive no longer unloads the model the moment it ends).
   */
  private async reapExpired(): Promise<void> {
    const now = Date.now();
    for (const lm of [...this.ready.values()]) {
      if (!lm.expiresAt) continue;
      if (this.busy(lm)) {
        if (lm.keepAliveMs !== Infinity) lm.expiresAt = new Date(Math.max(lm.expiresAt.getTime(), now + lm.keepAliveMs));
        continue;
      }
      if (lm.expiresAt.getTime() <= now) await this.unload(lm);
    }
  }

  private serialLoad(entry: CatalogEntry): Promise<LoadedModel> {
    // A load of a file still being unloaded waits: its contexts are not on disk yet.
    const p = this.loadChain
      .then(() => this.unloading.get(entry.path)?.catch(() => undefined))
      .then(() => this.makeRoom(entry))
      .then(() => {
        // Deleted or repointed while waiting its turn: loading it now would read a vanished blob.
        if (!this.isListed(entry.path)) throw new ModelNotFoundError(`${entry.name} was removed from the store`);
        return this.load(entry);
      });
    this.loadChain = p.catch(() => undefined);
    return p;
  }

  /** Unloads least-recently-used idle models until `entry` fits the budget (waits for busy ones, up to a point). */
  private async makeRoom(entry: CatalogEntry): Promise<void> {
    const need = this.estimate(entry);
    const deadline = Date.now() + FIT_WAIT_MS;
    for (;;) {
      // Taken out of the store while waiting: the load is refused now, not after the wait.
      if (!this.isListed(entry.path)) return;
      const others = [...this.ready.values()].filter((m) => m.entry.path !== entry.path);
      const leaving = [...this.leaving];
      const used = [...others, ...leaving].reduce((a, m) => a + m.estimatedBytes, 0);
      if (used + need <= this.memoryBudget || others.length + leaving.length === 0) return;
      const idle = others.filter((m) => !this.busy(m)).sort((a, b) => a.lastUsed - b.lastUsed);
      if (idle.length > 0) {
        this.log.log(`unloading ${idle[0].name} to make room for ${entry.name} (budget ${this.memoryBudget} bytes)`);
        await this.unload(idle[0]);
        continue;
      }
      if (Date.now() > deadline) {
        this.log.warn(`loading ${entry.name} over the memory budget: every resident model is busy`);
        return;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Bytes `entry` is counted for against the budget once loaded: its weights and a KV cache for the flags' context. */
  estimate(entry: CatalogEntry): number {
    return estimateBytes(entry, this.positionsFor(entry) * this.config.concurrency);
  }

  /** Positions one request gets on `entry` once loaded (the loader's rule, read from its metadata). */
  positionsFor(entry: CatalogEntry): number {
    return seqPositions(entry, this.config.ctxSize, DEFAULT_CTX_CAP);
  }

  /**
   * Bytes the budget leaves beside the models resident now and those still being freed, `except`
   * one file's own load (it needs no room beside itself). POST /v1/route asks, loading nothing;
   * a load would unload idle models to make more (makeRoom).
   */
  memoryRoom(except?: string): number {
    const others = [...this.ready.values()].filter((m) => m.entry.path !== except);
    const used = [...others, ...this.leaving].reduce((a, m) => a + m.estimatedBytes, 0);
    return Math.max(0, this.memoryBudget - used);
  }

  private async load(entry: CatalogEntry): Promise<LoadedModel> {
    const lm = await loadModel(entry, { backend: this.backend, config: this.config, kept: this.kept, log: this.log, estimate: (e) => this.estimate(e) });
    // Loaded by a request that set no keep_alive (a /v1 or context route): the -keep-alive default,
    // as the local runner gives its OpenAI routes; the default model's acquire says stay.
    lm.keepAliveMs = this.config.keepAliveMs;
    // acquire() checks `ready` to detect an unload; without this it re-acquires forever.
    this.ready.set(entry.path, lm);
    for (const fn of this.loadListeners) fn(lm);
    return lm;
  }
}

export { decodeTuning } from './model-loader';
