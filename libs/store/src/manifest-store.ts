import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { HEARTBEAT_MS, lockState, newToken, STALE_LOCK_MS, touch } from './pull/download-lock';
import { join } from 'node:path';
import { writeFileAtomic, fsyncDir } from './atomic-file';
import { checkDigest, displayName, manifestRelPath, ModelRef, parseModelRef } from './model-ref';
import { sameModel } from './model-names';

export const MEDIA_MODEL = 'application/vnd.ollama.image.model';
export const MEDIA_ADAPTER = 'application/vnd.ollama.image.adapter';
export const MEDIA_PROJECTOR = 'application/vnd.ollama.image.projector';
export const MEDIA_MANIFEST = 'application/vnd.docker.distribution.manifest.v2+json';

/** How long a copy's temporary file may sit unwritten before the next start removes it. */
export const STALE_COPY_MS = 10 * 60_000;
/** How long an unfinished download's parts wait for a pull to resume them (a week). */
export const STALE_PART_MS = 7 * 24 * 3600_000;

export interface Layer {
  mediaType: string;
  digest: string;
  size: number;
}

export interface Manifest {
  schemaVersion: number;
  mediaType?: string;
  config?: Layer;
  layers: Layer[];
}

export interface StoredModel {
  ref: ModelRef;
  name: string;
  manifest: Manifest;
  modifiedAt: Date;
}

/**
 * A content-addressed store in Ollama's layout: blobs/sha256-<hex> plus
 * manifests/<host>/<namespace>/<model>/<tag>. Used read-write for svc's own
 * store and read-only for the local-runner's (writable=false refuses every
 * write before it touches anything).
 */
export class ManifestStore {
  /**
   * Digests pulls in this process are fetching or have fetched but not yet referenced: never
   * garbage. Counted: two pulls of one model (one aborted, one retried) share their blobs.
   * Each is also a file, partial/<digest>.pin-<token>, kept fresh by a heartbeat, so another
   * process on the store (a second `svc pull`) keeps them too: one's failed pull deleted a blob
   * the other had just verified. A pin untouched for STALE_LOCK_MS is a process gone.
   */
  private readonly pins = new Map<string, number>();
  private readonly pinToken = newToken();
  private pinBeat?: NodeJS.Timeout;

  pin(digest: string): void {
    const n = (this.pins.get(digest) ?? 0) + 1;
    this.pins.set(digest, n);
    if (n > 1 || !this.writable) return;
    mkdirSync(this.partialDir, { recursive: true });
    writeFileSync(this.pinFile(digest), '');
    if (!this.pinBeat) {
      this.pinBeat = setInterval(() => {
        for (const d of this.pins.keys()) touch(this.pinFile(d));
      }, HEARTBEAT_MS);
      this.pinBeat.unref();
    }
  }

  unpin(digest: string): void {
    const n = (this.pins.get(digest) ?? 0) - 1;
    if (n > 0) return void this.pins.set(digest, n);
    this.pins.delete(digest);
    if (this.writable) rmSync(this.pinFile(digest), { force: true });
    if (this.pins.size === 0 && this.pinBeat) {
      clearInterval(this.pinBeat);
      this.pinBeat = undefined;
    }
  }

  private pinFile(digest: string): string {
    return join(this.partialDir, `${checkDigest(digest).replace(':', '-')}.pin-${this.pinToken}`);
  }

  /** Digests other processes on this store have pinned; pins gone stale (their process died) are removed. */
  private pinnedElsewhere(): Set<string> {
    const out = new Set<string>();
    for (const n of safeReaddir(this.partialDir)) {
      const m = /^sha256-([0-9a-f]{64})\.pin-(.+)$/.exec(n);
      if (!m || m[2] === this.pinToken) continue;
      const state = lockState(join(this.partialDir, n));
      if (state && state.age <= STALE_LOCK_MS) out.add(`sha256:${m[1]}`);
      else rmSync(join(this.partialDir, n), { force: true });
    }
    return out;
  }

  constructor(
    readonly root: string,
    readonly writable: boolean,
  ) {
    if (writable) this.sweepStaleCopies();
  }

  /**
   * A copy that crashed mid-way leaves its temporary file in partial/ under a name nothing will
   * ask for again (it carries a random id). One untouched for STALE_COPY_MS is not being written
   * by any process sharing the store, so it goes. A download's parts stay for STALE_PART_MS, so
   * a pull resumes them; past that they are a pull nobody retried (the tag moved, the model was
   * deleted), which kept gigabytes nothing listed.
   */
  private sweepStaleCopies(now = Date.now()): void {
    const names = safeReaddir(this.partialDir);
    const age = (n: string): number => {
      try {
        return now - statSync(join(this.partialDir, n)).mtimeMs;
      } catch {
        return 0; // gone already: nothing to remove
      }
    };
    const drop = (n: string): void => rmSync(join(this.partialDir, n), { force: true });
    // A download's files go together, by the newest of them: a validator is written once, at the
    // part's first bytes, and went alone while its recently resumed part stayed (which then
    // could not resume). Locks and pins of processes gone (untouched past their heartbeat) too.
    const downloads = new Map<string, string[]>();
    for (const n of names) {
      if (n.endsWith('.copy')) {
        if (age(n) > STALE_COPY_MS) drop(n);
      } else if (/\.lock$|\.pin-[^/]+$/.test(n)) {
        if (age(n) > STALE_LOCK_MS) drop(n);
      } else {
        const key = /^(.+?)\.(part\d+(\.validator)?|joined)$/.exec(n)?.[1];
        if (key) downloads.set(key, [...(downloads.get(key) ?? []), n]);
      }
    }
    for (const files of downloads.values()) if (Math.min(...files.map(age)) > STALE_PART_MS) files.forEach(drop);
  }

  get blobsDir(): string {
    return join(this.root, 'blobs');
  }

  /** Where unfinished downloads live until verified (svc's store only). */
  get partialDir(): string {
    return join(this.root, 'partial');
  }

  blobPath(digest: string): string {
    return join(this.blobsDir, checkDigest(digest).replace(':', '-'));
  }

  hasBlob(l: Layer): boolean {
    try {
      return statSync(this.blobPath(l.digest)).size === l.size;
    } catch {
      return false;
    }
  }

  /** Every readable manifest; a corrupt or foreign file is skipped, never fatal. */
  list(): StoredModel[] {
    const base = join(this.root, 'manifests');
    const out: StoredModel[] = [];
    for (const host of dirs(base)) {
      for (const ns of dirs(join(base, host))) {
        for (const model of dirs(join(base, host, ns))) {
          for (const tag of files(join(base, host, ns, model))) {
            const m = this.readManifest(`${host}/${ns}/${model}:${tag}`);
            if (m) out.push(m);
          }
        }
      }
    }
    return out;
  }

  find(name: string): StoredModel | undefined {
    return this.list().find((m) => sameModel(m.name, name));
  }

  readManifest(name: string): StoredModel | undefined {
    let ref: ModelRef;
    try {
      ref = parseModelRef(name);
    } catch {
      return undefined;
    }
    const path = join(this.root, 'manifests', ...manifestRelPath(ref));
    try {
      const manifest = JSON.parse(readFileSync(path, 'utf8')) as Manifest;
      if (!Array.isArray(manifest.layers)) return undefined;
      for (const l of manifest.layers) checkDigest(l.digest);
      return { ref, name: displayName(ref), manifest, modifiedAt: statSync(path).mtime };
    } catch {
      return undefined;
    }
  }

  /** The last step of a pull or copy: the model becomes visible atomically. */
  writeManifest(ref: ModelRef, manifest: Manifest): void {
    this.mustWrite();
    for (const l of [...manifest.layers, ...(manifest.config ? [manifest.config] : [])]) {
      if (!this.hasBlob(l)) throw new Error(`blob ${l.digest} is missing; not writing the manifest`);
    }
    // Names match loosely (case): `Mine` replaces `mine` rather than hiding beside it.
    const replaced = this.find(displayName(ref));
    const path = join(this.root, 'manifests', ...manifestRelPath(ref));
    writeFileAtomic(path, JSON.stringify(manifest));
    if (!replaced) return;
    const old = join(this.root, 'manifests', ...manifestRelPath(replaced.ref));
    // On a case-insensitive file system the two spellings are one file, just written.
    if (old !== path && statSync(old, { throwIfNoEntry: false })?.ino !== statSync(path).ino) this.unlinkManifest(replaced.ref);
    // A tag pulled again or copied over lets go of the blobs only its old manifest held.
    this.collectGarbage(digestsOf(replaced.manifest));
  }

  /** Deletes a blob that no manifest (or running pull) references. */
  dropUnreferenced(digest: string): void {
    this.collectGarbage(new Set([digest]));
  }

  /** Removes one manifest, then every blob no other manifest (or running pull) references. */
  remove(m: StoredModel): void {
    this.mustWrite();
    this.unlinkManifest(m.ref);
    this.collectGarbage(digestsOf(m.manifest));
  }

  private unlinkManifest(ref: ModelRef): void {
    const dir = join(this.root, 'manifests', ...manifestRelPath(ref).slice(0, 3));
    unlinkSync(join(dir, ref.tag));
    fsyncDir(dir);
    for (const d of [dir, join(dir, '..'), join(dir, '..', '..')]) {
      try {
        rmdirSync(d); // only succeeds when empty
      } catch {
        break;
      }
    }
  }

  private collectGarbage(candidates: Set<string>): void {
    const live = new Set<string>([...this.pins.keys(), ...this.pinnedElsewhere()]);
    for (const other of this.list()) for (const d of digestsOf(other.manifest)) live.add(d);
    for (const d of candidates) {
      if (live.has(d)) continue;
      try {
        unlinkSync(this.blobPath(d));
      } catch {
        // already gone
      }
    }
  }

  private mustWrite(): void {
    if (!this.writable) throw new Error(`${this.root} is read-only to svc`);
  }
}

export function digestsOf(m: Manifest): Set<string> {
  return new Set([...m.layers, ...(m.config ? [m.config] : [])].map((l) => l.digest));
}

export function modelLayer(m: Manifest): Layer | undefined {
  return m.layers.find((l) => l.mediaType === MEDIA_MODEL);
}

function dirs(p: string): string[] {
  return entries(p).filter((e) => e.isDirectory()).map((e) => e.name);
}

function files(p: string): string[] {
  return entries(p).filter((e) => e.isFile()).map((e) => e.name);
}

function entries(p: string) {
  if (!existsSync(p)) return [];
  try {
    return readdirSync(p, { withFileTypes: true }).filter((e) => !e.name.startsWith('.'));
  } catch {
    return [];
  }
}

function safeReaddir(p: string): string[] {
  try {
    return readdirSync(p);
  } catch {
    return [];
  }
}
