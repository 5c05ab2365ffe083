import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { ModelNotFoundError, NoModelError } from '../../engine/src/core/errors';
import { capabilitiesOf, GgufMetadata, readGgufMetadata } from './gguf-metadata';
import { Layer, Manifest, ManifestStore, MEDIA_ADAPTER, MEDIA_PROJECTOR, modelLayer, StoredModel } from './manifest-store';
import { defaultsOf, ModelDefaults } from './model-defaults';
import { sameModel } from './model-names';

export type ModelSource = 'file' | 'svc' | 'ollama';

export interface CatalogEntry {
  name: string;
  path: string;
  source: ModelSource;
  sizeBytes: number;
  modifiedAt: Date;
  capabilities: string[];
  meta?: GgufMetadata;
  /** Store models: the manifest (template, system, params layers for /api/show). */
  manifest?: Manifest;
  /** Store models: the digest of the weights layer. */
  digest?: string;
  /** A vision projector (mmproj GGUF) loaded beside the weights: -mmproj for -m, or the manifest's projector layer. */
  projector?: string;
  /** The projector came from -mmproj: one that fails to load stops the server (a store's is skipped with a warning). */
  projectorFlag?: boolean;
}

export interface CatalogOptions {
  /** -m: a file path or a store name. */
  defaultModel?: string;
  /** -mmproj: the vision projector for -m's model. */
  defaultProjector?: string;
  /** -embed: the encoder, a file path or a store name. */
  encoderModel?: string;
  /** -rerank: the cross-encoder, a file path or a store name. */
  rerankerModel?: string;
  /** svc's own store folder. */
  storeDir: string;
  /** The local-runner's store (read-only); default $OLLAMA_MODELS, else ~/.ollama/models; null: none. */
  ollamaDir?: string | null;
}

/** The local-runner's store folder, as Ollama itself finds it. */
export function defaultOllamaDir(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.OLLAMA_MODELS || join(homedir(), '.ollama', 'models'));
}

/** How long resolve() trusts its last look at the -m file (size and modification time). */
export const DEFAULT_FILE_RECHECK_MS = 1000;

/**
 * Every model the server could load: the -m file plus the store's models. The
 * model-store work extends the sources (manifests, the local-runner's store);
 * everything above asks this class only.
 */
export class ModelCatalog {
  private readonly metaCache = new Map<string, { mtimeMs: number; meta?: GgufMetadata }>();
  private readonly defaultFile?: string;
  /** The -embed and -rerank files, listed after the -m file. */
  private readonly encoderFile?: string;
  private readonly rerankerFile?: string;
  /** The -m file's entry, kept while its size and time are unchanged (resolve's fast path). */
  private defaultEntry?: CatalogEntry;
  /** When resolve() last found the -m file unchanged (performance.now()). */
  private defaultCheckedAt = -Infinity;
  /** Without -m: the default model chosen (defaultName), by name and weights. */
  private chosen?: { name: string; path: string };
  /** svc's own store (read-write). */
  readonly store: ManifestStore;
  /** The local-runner's store: svc never writes there. */
  readonly ollama?: ManifestStore;

  constructor(private readonly opts: CatalogOptions) {
    const m = opts.defaultModel;
    if (m && isFilePath(m)) this.defaultFile = resolve(m);
    const enc = opts.encoderModel;
    if (enc && isFilePath(enc)) this.encoderFile = resolve(enc);
    const rr = opts.rerankerModel;
    if (rr && isFilePath(rr)) this.rerankerFile = resolve(rr);
    this.store = new ManifestStore(opts.storeDir, true);
    const od = opts.ollamaDir === undefined ? defaultOllamaDir() : opts.ollamaDir;
    if (od && resolve(od) !== resolve(opts.storeDir)) this.ollama = new ManifestStore(od, false);
  }

  /** The -m file, svc's store (manifests, then flat files), then the local-runner's; the first of a name wins. */
  list(): CatalogEntry[] {
    const entries: CatalogEntry[] = [];
    const add = (e: CatalogEntry | undefined) => {
      if (e && !entries.some((x) => sameModel(x.name, e.name))) entries.push(this.withFlagProjector(e));
    };
    // A file removed behind the server's back is not listed (its stat threw, and every listing failed).
    if (this.defaultFile) add(this.presentEntry(this.defaultFile, 'file'));
    for (const f of [this.encoderFile, this.rerankerFile]) if (f && f !== this.defaultFile) add(this.presentEntry(f, 'file'));
    const own = this.store.list();
    for (const sm of own) for (const e of this.manifestEntries(sm, this.store, own)) add(e);
    for (const p of this.storeFiles()) {
      if (p !== this.defaultFile && p !== this.encoderFile && p !== this.rerankerFile) add(this.presentEntry(p, 'svc'));
    }
    if (this.ollama) {
      const theirs = this.ollama.list();
      for (const sm of theirs) for (const e of this.manifestEntries(sm, this.ollama, theirs)) add(e);
    }
    return entries;
  }

  /** -mmproj goes with -m's model (a file or a store name), over a manifest's own projector. */
  private withFlagProjector(e: CatalogEntry): CatalogEntry {
    const p = this.opts.defaultProjector;
    if (!p || !this.opts.defaultModel) return e;
    const isDefault = this.defaultFile ? e.path === this.defaultFile && e.source === 'file' : sameModel(e.name, this.opts.defaultModel);
    return isDefault ? { ...e, projector: resolve(p), projectorFlag: true } : e;
  }

  /** A store model's params, system and license layers ({} for a file or a manifest without them). */
  defaults(e: CatalogEntry): ModelDefaults {
    const st = e.source === 'ollama' ? this.ollama : this.store;
    return defaultsOf(e.manifest, (digest) => {
      try {
        return st ? readFileSync(st.blobPath(digest), 'utf8') : undefined;
      } catch {
        return undefined;
      }
    });
  }

  /**
   * The name '' stands for (spec rule 1), decided here only: the -m model; without -m, the model
   * chosen when first asked (boot, or the first pull into a server with none), kept until no
   * listed name has it. Undefined: no model generates (encoders never are the default unless -m).
   */
  defaultName(): string | undefined {
    return this.defaultNameIn(() => this.list());
  }

  private defaultNameIn(list: () => CatalogEntry[]): string | undefined {
    if (this.defaultFile) return modelNameOf(this.defaultFile);
    if (this.opts.defaultModel) return this.opts.defaultModel;
    const all = list().filter(generates);
    const c = this.chosen;
    // Kept by its name, else by another name of its weights (a copy, then a delete of the first name):
    // a pull or copy never moves it, so '' and /healthz keep naming one model.
    const kept = c && (all.find((e) => sameModel(e.name, c.name)) ?? all.find((e) => e.path === c.path));
    // Chosen anew: the newest (the one just pulled into an empty server).
    const next = kept ?? all.sort((a, b) => b.modifiedAt.getTime() - a.modifiedAt.getTime())[0];
    this.chosen = next && { name: next.name, path: next.path };
    return next?.name;
  }

  /** The name of -embed's encoder (undefined without the flag). */
  encoderName(): string | undefined {
    if (this.encoderFile) return modelNameOf(this.encoderFile);
    return this.opts.encoderModel || undefined;
  }

  /** The name of -rerank's cross-encoder (undefined without the flag). */
  rerankerName(): string | undefined {
    if (this.rerankerFile) return modelNameOf(this.rerankerFile);
    return this.opts.rerankerModel || undefined;
  }

  /**
   * The entry a name (or '' for the default) stands for. The no-model state answers 503 whatever
   * the name (spec rule 7): for `generating` (a generation route) while no model generates (an
   * -embed encoder alone is that state), for `encoding` (embeddings, rerank) while none is listed.
   */
  resolve(name: string, opts: { generating?: boolean; encoding?: boolean } = {}): CatalogEntry {
    // The -m file wins its name in list(): every request naming it (or none)
    // is answered without reading the stores' folders and manifests again.
    if (this.defaultFile && (name === '' || sameModel(modelNameOf(this.defaultFile), name))) {
      const last = this.defaultEntry;
      const now = performance.now();
      // A stat on every request was ~2 % of a short request's JavaScript; a replaced
      // -m file is noticed within DEFAULT_FILE_RECHECK_MS instead of at once.
      if (last && now - this.defaultCheckedAt < DEFAULT_FILE_RECHECK_MS) return last;
      const st = statSync(this.defaultFile, { throwIfNoEntry: false });
      if (st) {
        this.defaultCheckedAt = now;
        if (last && last.sizeBytes === st.size && last.modifiedAt.getTime() === st.mtime.getTime()) return last;
        return (this.defaultEntry = this.withFlagProjector(this.fileEntry(this.defaultFile, 'file')));
      }
    }
    const all = this.list();
    const want = name === '' ? this.defaultNameIn(() => all) : name;
    if (want === undefined) throw new NoModelError();
    const hit = all.find((e) => sameModel(e.name, want));
    if (hit) return hit;
    // -m names a store model not pulled yet: '' is served once it is.
    if (name === '' && want === this.opts.defaultModel && !this.defaultFile) {
      throw new NoModelError(`this server's default model ${want} is not in the store. Pull it: POST /api/pull {"model": "${want}"}`);
    }
    if (opts.generating && this.defaultNameIn(() => all) === undefined) throw new NoModelError();
    if (all.length === 0 && (name === '' || opts.generating || opts.encoding)) throw new NoModelError();
    throw new ModelNotFoundError(notFoundMessage(want, all));
  }

  private storeFiles(): string[] {
    const dir = this.opts.storeDir;
    if (!existsSync(dir)) return [];
    return readdirSync(dir)
      .filter((f) => f.endsWith('.gguf'))
      .map((f) => join(dir, f));
  }

  /**
   * One manifest's list entries: the weights under the manifest's name; a LoRA
   * adapter as <base>+<name> (base: the manifest with the same weights and no
   * adapter); a projector-only manifest with empty capabilities.
   */
  private manifestEntries(sm: StoredModel, st: ManifestStore, all: StoredModel[]): CatalogEntry[] {
    const source: ModelSource = st === this.store ? 'svc' : 'ollama';
    const weights = modelLayer(sm.manifest);
    const adapter = sm.manifest.layers.find((l) => l.mediaType === MEDIA_ADAPTER);
    const projector = sm.manifest.layers.find((l) => l.mediaType === MEDIA_PROJECTOR);
    if (adapter) {
      const base = all.find((o) => o !== sm && !o.manifest.layers.some((l) => l.mediaType === MEDIA_ADAPTER) && modelLayer(o.manifest)?.digest === weights?.digest);
      const e = this.layerEntry(`${base?.name ?? baseNameOf(this.layerMeta(st, weights)) ?? 'base'}+${sm.name}`, st, adapter, sm, source);
      return e ? [e] : [];
    }
    const layer = weights ?? projector;
    const e = layer && this.layerEntry(sm.name, st, layer, sm, source);
    if (e && !weights) e.capabilities = [];
    // Weights with a projector layer beside them (a vision model as the local runner stores it).
    if (e && weights && projector && existsSync(st.blobPath(projector.digest))) e.projector = st.blobPath(projector.digest);
    return e ? [e] : [];
  }

  private layerEntry(name: string, st: ManifestStore, l: Layer, sm: StoredModel, source: ModelSource): CatalogEntry | undefined {
    const path = st.blobPath(l.digest);
    if (!existsSync(path)) return undefined;
    const e = this.fileEntry(path, source);
    return { ...e, name, modifiedAt: sm.modifiedAt, manifest: sm.manifest, digest: l.digest };
  }

  private layerMeta(st: ManifestStore, l: Layer | undefined): GgufMetadata | undefined {
    if (!l) return undefined;
    const p = st.blobPath(l.digest);
    return existsSync(p) ? this.metadata(p, statSync(p).mtimeMs) : undefined;
  }

  private presentEntry(path: string, source: ModelSource): CatalogEntry | undefined {
    try {
      return this.fileEntry(path, source);
    } catch {
      return undefined;
    }
  }

  private fileEntry(path: string, source: ModelSource): CatalogEntry {
    const st = statSync(path);
    const meta = this.metadata(path, st.mtimeMs);
    return { name: modelNameOf(path), path, source, sizeBytes: st.size, modifiedAt: st.mtime, capabilities: capabilitiesOf(meta), meta };
  }

  private metadata(path: string, mtimeMs: number): GgufMetadata | undefined {
    const hit = this.metaCache.get(path);
    if (hit && hit.mtimeMs === mtimeMs) return hit.meta;
    let meta: GgufMetadata | undefined;
    try {
      meta = readGgufMetadata(path);
    } catch {
      meta = undefined;
    }
    this.metaCache.set(path, { mtimeMs, meta });
    return meta;
  }
}

function baseNameOf(meta: GgufMetadata | undefined): string | undefined {
  const n = meta?.kv['general.name'];
  return typeof n === 'string' && n ? n : undefined;
}

/** An embeddings model (an encoder or a cross-encoder): it cannot generate, and only the embedding and rerank routes load it. */
export function isEncoderEntry(e: CatalogEntry): boolean {
  return e.capabilities.includes('embeddings');
}

/** A model '' may stand for without -m: it generates (an encoder does not; nor a projector or adapter, with no capabilities). */
function generates(e: CatalogEntry): boolean {
  return e.capabilities.length > 0 && !isEncoderEntry(e);
}

/** A cross-encoder: its metadata asks for rank pooling (llama.cpp's LLAMA_POOLING_TYPE_RANK), one relevance score per pair. */
export function isRerankerEntry(e: CatalogEntry): boolean {
  const kv = e.meta?.kv ?? {};
  return isEncoderEntry(e) && Number(kv[`${String(kv['general.architecture'] ?? '')}.pooling_type`]) === 4;
}

/** -m and -embed name a file when they look like a path and it exists; otherwise a store name. */
function isFilePath(m: string): boolean {
  return (m.includes('/') || m.endsWith('.gguf')) && existsSync(m);
}

export function modelNameOf(path: string): string {
  return basename(path).replace(/\.gguf$/i, '');
}

export function notFoundMessage(name: string, all: CatalogEntry[]): string {
  const names = all.map((e) => (e.source === 'ollama' ? `${e.name} (ollama)` : e.name));
  return `no model named ${name}; available: ${names.length ? names.join(', ') : '(none)'}`;
}
