import { existsSync, mkdirSync, unlinkSync } from 'node:fs';
import { copyFile, open } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { EngineError, InvalidRequestError, ModelNotFoundError } from '../../engine/src/core/errors';
import { sha256File } from '../../engine/src/models/file-hash';
import { renameDurable } from './atomic-file';
import { CatalogEntry, ModelCatalog, notFoundMessage } from './catalog';
import { Layer, Manifest, ManifestStore, MEDIA_MANIFEST, MEDIA_MODEL } from './manifest-store';
import { displayName, parseModelRef } from './model-ref';
import { sameModel, withoutLatest } from './model-names';

export class ReadOnlyStoreError extends EngineError {
  constructor(name: string) {
    super(`${name} belongs to the local-runner's store, which svc only reads`, 403);
  }
}

/**
 * Copy and delete, in svc's own store only. A copy from the local-runner's
 * store (or from a plain .gguf file) copies the blobs in, so svc never writes
 * to, or depends on, a store it does not own.
 */
export class StoreAdmin {
  constructor(private readonly catalog: ModelCatalog) {}

  private get store(): ManifestStore {
    return this.catalog.store;
  }

  async copy(source: string, destination: string): Promise<string> {
    const dst = parseModelRef(destination); // refuse a hostile name before anything else
    const src = this.catalog.list().find((e) => sameModel(e.name, String(source ?? '')));
    if (!src) throw new ModelNotFoundError(notFoundMessage(String(source ?? ''), this.catalog.list()));
    // A name that differs from a stored one only in case is that model (names match loosely): a
    // copy there would replace it, the source itself when it is the one (the local runner refuses too).
    const want = displayName(dst);
    const held = this.catalog.list().find((e) => sameModel(e.name, want));
    if (held && withoutLatest(held.name) !== withoutLatest(want)) throw new InvalidRequestError(`a model with that name already exists: ${held.name}`);
    let manifest: Manifest;
    // An adapter entry (<base>+<name>) carries its own manifest: the copy is listed as <base>+<destination>.
    if (src.manifest) {
      const from = src.source === 'ollama' ? this.catalog.ollama! : this.store;
      for (const l of allLayers(src.manifest)) if (!this.store.hasBlob(l)) await this.importBlob(from.blobPath(l.digest), l.digest);
      manifest = src.manifest;
    } else {
      const hex = await sha256File(src.path);
      const layer: Layer = { mediaType: MEDIA_MODEL, digest: `sha256:${hex}`, size: src.sizeBytes };
      if (!this.store.hasBlob(layer)) await this.importBlob(src.path, layer.digest);
      manifest = { schemaVersion: 2, mediaType: MEDIA_MANIFEST, layers: [layer] };
    }
    this.store.writeManifest(dst, manifest);
    return displayName(dst);
  }

  /** Removes a model from svc's store; returns the entry so its loaded copy can be freed. */
  delete(name: string): CatalogEntry {
    const want = String(name ?? '').trim();
    if (!want) throw new InvalidRequestError('a model name is required');
    const hit = this.catalog.list().find((e) => sameModel(e.name, want));
    // An adapter entry is listed as <base>+<name>; its manifest is stored under <name>.
    const own = this.store.find(want) ?? (hit?.source === 'svc' && hit.manifest && hit.name.includes('+') ? this.store.find(hit.name.slice(hit.name.lastIndexOf('+') + 1)) : undefined);
    if (own) {
      this.store.remove(own);
      return hit ?? ({ name: own.name, path: '' } as CatalogEntry);
    }
    if (!hit) throw new ModelNotFoundError(notFoundMessage(want, this.catalog.list()));
    if (hit.source === 'ollama') throw new ReadOnlyStoreError(hit.name);
    if (hit.source === 'file') throw new InvalidRequestError(`${hit.name} is the -m file, not a store model; svc does not delete it`);
    unlinkSync(hit.path); // a flat .gguf in svc's store folder
    return hit;
  }

  /**
   * Copies a file into blobs/ via partial/, so a crash leaves no half blob visible.
   * Off the event loop: a multi-GB copy and its fsync held every other request.
   */
  private async importBlob(from: string, digest: string): Promise<void> {
    if (!existsSync(from)) throw new ModelNotFoundError(`blob ${digest} is missing from the source store`);
    mkdirSync(this.store.partialDir, { recursive: true });
    // Its own temporary name: concurrent copies of one blob must not write or rename each other's file.
    const tmp = join(this.store.partialDir, `${digest.replace(':', '-')}.${randomUUID()}.copy`);
    await copyFile(from, tmp);
    const fh = await open(tmp, 'r+');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    renameDurable(tmp, this.store.blobPath(digest));
  }
}

function allLayers(m: Manifest): Layer[] {
  return [...(m.config ? [m.config] : []), ...m.layers];
}
