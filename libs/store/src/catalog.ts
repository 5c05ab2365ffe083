import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { ModelNotFoundError, NoModelError } from '../../engine/src/core/errors';
import { capabilitiesOf, GgufMetadata, readGgufMetadata } from './gguf-metadata';
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
}

export interface CatalogOptions {
  /** -m: a file path or a store name. */
  defaultModel?: string;
  /** svc's own store folder. */
  storeDir: string;
}

/**
 * Every model the server could load: the -m file plus the store's models. The
 * model-store work extends the sources (manifests, the local-runner's store);
 * everything above asks this class only.
 */
export class ModelCatalog {
  private readonly metaCache = new Map<string, { mtimeMs: number; meta?: GgufMetadata }>();
  private readonly defaultFile?: string;

  constructor(private readonly opts: CatalogOptions) {
    const m = opts.defaultModel;
    if (m && (m.includes('/') || m.endsWith('.gguf')) && existsSync(m)) this.defaultFile = resolve(m);
  }

  list(): CatalogEntry[] {
    const entries: CatalogEntry[] = [];
    if (this.defaultFile) entries.push(this.fileEntry(this.defaultFile, 'file'));
    for (const p of this.storeFiles()) {
      if (p !== this.defaultFile) entries.push(this.fileEntry(p, 'svc'));
    }
    return entries;
  }

  /** The name '' stands for the default model. */
  defaultName(): string | undefined {
    if (this.defaultFile) return modelNameOf(this.defaultFile);
    if (this.opts.defaultModel) return this.opts.defaultModel;
    const all = this.list().filter((e) => e.capabilities.length > 0);
    all.sort((a, b) => b.modifiedAt.getTime() - a.modifiedAt.getTime());
    return all[0]?.name;
  }

  resolve(name: string): CatalogEntry {
    const all = this.list();
    const want = name === '' ? this.defaultName() : name;
    if (want === undefined) throw new NoModelError();
    const hit = all.find((e) => sameModel(e.name, want));
    if (hit) return hit;
    if (all.length === 0 && name === '') throw new NoModelError();
    throw new ModelNotFoundError(notFoundMessage(want, all));
  }

  private storeFiles(): string[] {
    const dir = this.opts.storeDir;
    if (!existsSync(dir)) return [];
    return readdirSync(dir)
      .filter((f) => f.endsWith('.gguf'))
      .map((f) => join(dir, f));
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

export function modelNameOf(path: string): string {
  return basename(path).replace(/\.gguf$/i, '');
}

export function notFoundMessage(name: string, all: CatalogEntry[]): string {
  const names = all.map((e) => (e.source === 'ollama' ? `${e.name} (ollama)` : e.name));
  return `no model named ${name}; available: ${names.length ? names.join(', ') : '(none)'}`;
}
