import { createHash } from 'node:crypto';
import { closeSync, openSync, readSync, statSync, mkdirSync } from 'node:fs';
import { InvalidRequestError } from '../../../engine/src/core/errors';
import { Layer, Manifest, ManifestStore, MEDIA_MANIFEST, MEDIA_MODEL } from '../manifest-store';
import { checkDigest, displayName, ModelRef, parseModelRef } from '../model-ref';
import { downloadBlob } from './blob-download';
import { withDownloadLock } from './download-lock';
import { PullError, reach, RegistryClient } from './registry-client';

/** One progress object, as the local-runner's pull streams them. */
export interface PullProgress {
  status: string;
  digest?: string;
  total?: number;
  completed?: number;
}

export interface PullOptions {
  insecure?: boolean;
  signal?: AbortSignal;
  onProgress?: (p: PullProgress) => void;
}

const PROGRESS_EVERY_MS = 100;

/**
 * Pulls a model into svc's store: from a registry (Ollama's protocol; also
 * hf.co/<user>/<repo>:<quant>) or from a plain http(s) URL of a GGUF file.
 * Order of visibility: blobs only after their sha256 verified, the manifest
 * last, so a model is either wholly there or not listed at all.
 */
export class PullService {
  /** One download per digest at a time, even across concurrent pulls. */
  private readonly inFlight = new Map<string, Promise<unknown>>();

  constructor(
    private readonly store: ManifestStore,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  /** Returns the name the model is listed under. */
  async pull(source: string, o: PullOptions = {}): Promise<string> {
    const emit = o.onProgress ?? (() => undefined);
    const src = String(source ?? '').trim();
    if (/^https?:\/\//i.test(src)) return this.pullUrl(src, o, emit);
    const ref = parseModelRef(src);
    const client = new RegistryClient(ref, { insecure: o.insecure, env: this.env });
    emit({ status: 'pulling manifest' });
    const manifest = await client.manifest(o.signal);
    const layers = [...(manifest.config ? [manifest.config] : []), ...manifest.layers];
    for (const l of layers) checkDigest(l.digest);
    // Pulled anyway, it answered "success" and was then listed nowhere (the catalog lists weights).
    if (!manifest.layers.some((l) => l.mediaType === MEDIA_MODEL)) {
      throw new PullError(`pull: the registry's manifest for ${displayName(ref)} holds no model weights (no ${MEDIA_MODEL} layer)`, 502);
    }
    for (const l of layers) this.store.pin(l.digest);
    let written = false;
    try {
      for (const l of layers) await this.fetchLayer(client, l, o, emit);
      emit({ status: 'verifying sha256 digest' });
      emit({ status: 'writing manifest' });
      this.store.writeManifest(ref, manifest);
      written = true;
    } finally {
      for (const l of layers) this.store.unpin(l.digest);
      // A pull that failed keeps no blob nothing lists (layers fetched before the one that failed).
      if (!written) for (const l of layers) this.store.dropUnreferenced(l.digest);
    }
    emit({ status: 'success' });
    return displayName(ref);
  }

  private async fetchLayer(client: RegistryClient, l: Layer, o: PullOptions, emit: (p: PullProgress) => void): Promise<void> {
    const status = `pulling ${l.digest.slice(7, 19)}`;
    if (this.store.hasBlob(l)) {
      emit({ status, digest: l.digest, total: l.size, completed: l.size });
      return;
    }
    const key = l.digest.replace(':', '-');
    await this.once(l.digest, () =>
      // One download of a blob at a time across processes too; another's may bring it meanwhile.
      this.withLock(key, o.signal, async () =>
        this.store.hasBlob(l) ? undefined : downloadBlob({
          digest: l.digest,
          key,
          size: l.size,
          partialDir: this.store.partialDir,
          dest: () => this.store.blobPath(l.digest),
          get: (headers, signal) => client.fetch(client.blobUrl(l.digest), { headers, signal }),
          onProgress: throttle((completed, total) => emit({ status, digest: l.digest, total, completed })),
          signal: o.signal,
        }),
      ),
    );
    emit({ status, digest: l.digest, total: l.size, completed: l.size });
  }

  /** A GGUF at a URL becomes a one-layer manifest named after the file. */
  private async pullUrl(url: string, o: PullOptions, emit: (p: PullProgress) => void): Promise<string> {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new InvalidRequestError(`pull: ${url} is not a URL`);
    }
    const ref = refForUrl(u);
    emit({ status: 'pulling manifest' });
    // A server that cannot answer HEAD is asked for the file itself; a pull called off is not.
    const head = await fetch(u, { method: 'HEAD', redirect: 'follow', signal: o.signal }).catch((err: Error) => {
      if (o.signal?.aborted) throw err;
      return undefined;
    });
    if (head && head.status === 404) throw new PullError(`pull: ${u.host} has no file at ${u.pathname}`, 404);
    const len = Number(head?.headers.get('content-length') ?? NaN);
    const size = head?.ok && Number.isFinite(len) && len > 0 ? len : undefined;
    const key = `url-${createHash('sha256').update(url).digest('hex').slice(0, 24)}`;
    const status = `pulling ${key.slice(4, 16)}`;
    const hex = await this.once(key, () =>
      this.withLock(key, o.signal, () =>
        downloadBlob({
          key,
          size,
          partialDir: this.store.partialDir,
          dest: (h) => this.store.blobPath(`sha256:${h}`),
          get: (headers, signal) => reach(u.href, { headers, signal, redirect: 'follow' }),
          onProgress: throttle((completed, total) => emit({ status, total: total || completed, completed })),
          onVerify: () => emit({ status: 'verifying sha256 digest' }),
          signal: o.signal,
        }),
      ),
    );
    const digest = `sha256:${hex}`;
    // A URL is the caller's choice: a page or an archive there is refused, not listed as a model.
    if (!isGguf(this.store.blobPath(digest))) {
      this.store.dropUnreferenced(digest);
      throw new InvalidRequestError(`pull: ${u.href} is not a GGUF model file`);
    }
    const layer: Layer = { mediaType: MEDIA_MODEL, digest, size: this.blobSize(digest) };
    const manifest: Manifest = { schemaVersion: 2, mediaType: MEDIA_MANIFEST, layers: [layer] };
    emit({ status: 'writing manifest' });
    this.store.writeManifest(ref, manifest);
    emit({ status: 'success' });
    return displayName(ref);
  }

  private blobSize(digest: string): number {
    return statSync(this.store.blobPath(digest)).size;
  }

  /** The download of `key` by this process alone on the store (see withDownloadLock); partial/ made first. */
  private withLock<T>(key: string, signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T> {
    mkdirSync(this.store.partialDir, { recursive: true });
    return withDownloadLock(this.store.partialDir, key, signal, fn);
  }

  private async once<T>(key: string, fn: () => Promise<T>): Promise<T> {
    for (;;) {
      const running = this.inFlight.get(key);
      if (!running) break;
      await running.catch(() => undefined);
    }
    const p = fn();
    this.inFlight.set(key, p);
    try {
      return await p;
    } finally {
      this.inFlight.delete(key);
    }
  }
}

function isGguf(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    const magic = Buffer.alloc(4);
    return readSync(fd, magic, 0, 4, 0) === 4 && magic.toString('latin1') === 'GGUF';
  } finally {
    closeSync(fd);
  }
}

/** `https://host/path/Tiny-Model.Q8_0.gguf` → `tiny-model.q8_0:latest`. */
export function refForUrl(u: URL): ModelRef {
  let file: string;
  try {
    file = decodeURIComponent(u.pathname.split('/').pop() ?? '');
  } catch {
    throw new InvalidRequestError(`cannot name a model after ${u.href}: its file name is not valid percent-encoding`);
  }
  const base = file.replace(/\.gguf$/i, '').toLowerCase().replace(/[^a-z0-9_.-]+/g, '-').replace(/^[^a-z0-9_]+/, '').replace(/\.\.+/g, '.').slice(0, 128);
  if (!base) throw new InvalidRequestError(`cannot name a model after ${u.href}: the path has no file name`);
  return parseModelRef(base);
}

/** Progress at most every 100 ms per layer, plus the final one. */
function throttle(fn: (completed: number, total: number) => void): (completed: number, total: number) => void {
  let last = 0;
  return (completed, total) => {
    const now = Date.now();
    if (now - last < PROGRESS_EVERY_MS && completed !== total) return;
    last = now;
    fn(completed, total);
  };
}
