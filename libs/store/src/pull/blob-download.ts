import { createHash } from 'node:crypto';
import { closeSync, createReadStream, fsyncSync, mkdirSync, openSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { renameDurable } from '../atomic-file';
import { PullError } from './registry-client';

/** Blobs above this are fetched as PARTS parallel ranges. */
export const PARALLEL_THRESHOLD = 64 << 20;
export const PARTS = 4;
const RETRIES = 6;

export interface BlobJob {
  /** sha256:<hex>; the file is verified against it before it becomes visible. Undefined for a plain URL: the hash names the blob. */
  digest?: string;
  /** Names the part files in partial/ (stable across restarts, so a pull resumes). */
  key: string;
  /** Expected size, or undefined when unknown (a plain URL without Content-Length). */
  size?: number;
  partialDir: string;
  /** Final place for a blob of this sha256 hex: blobs/sha256-<hex>. */
  dest: (hex: string) => string;
  /** Issues one GET (the registry client adds auth and follows redirects). */
  get: (headers: Record<string, string>, signal?: AbortSignal) => Promise<Response>;
  onProgress: (completed: number, total: number) => void;
  /** Called between download and rename, for the "verifying sha256 digest" status. */
  onVerify?: () => void;
  signal?: AbortSignal;
}

/**
 * Downloads one blob resumably: each range goes to its own file in partial/,
 * so a dropped connection or a kill -9 resumes with `Range: bytes=N-` where the
 * part stopped. The parts are joined while hashing; only a file whose sha256
 * matches is renamed into blobs/. A mismatch deletes the parts (they would
 * never verify) and fails the pull.
 */
export async function downloadBlob(job: BlobJob): Promise<string> {
  mkdirSync(job.partialDir, { recursive: true });
  const hex = job.digest?.slice('sha256:'.length);
  const total = job.size ?? 0;
  const nParts = total > PARALLEL_THRESHOLD ? PARTS : 1;
  const span = Math.ceil(total / nParts);
  const parts = Array.from({ length: nParts }, (_, i) => ({
    file: join(job.partialDir, `${job.key}.part${i}`),
    start: i * span,
    end: nParts === 1 ? undefined : Math.min(total, (i + 1) * span) - 1,
  }));
  const done = parts.map((p) => sizeOf(p.file));
  const report = () => job.onProgress(done.reduce((a, b) => a + b, 0), total);
  report();
  await Promise.all(parts.map((p, i) => fetchPart(job, p, (n) => ((done[i] = n), report()))));
  job.onVerify?.();
  const joined = join(job.partialDir, `${job.key}.joined`);
  const got = await joinAndHash(parts.map((p) => p.file), joined);
  if ((hex !== undefined && got !== hex) || (job.size !== undefined && sizeOf(joined) !== job.size)) {
    for (const f of [joined, ...parts.map((p) => p.file)]) tryUnlink(f);
    throw new PullError(`digest mismatch: expected sha256:${hex}, got sha256:${got}`, 502);
  }
  renameDurable(joined, job.dest(got));
  for (const p of parts) tryUnlink(p.file);
  return got;
}

interface Part {
  file: string;
  start: number;
  /** Inclusive end; undefined: to the end of the blob. */
  end?: number;
}

/** A reply that cannot succeed by asking again: the pull fails at once. */
class Permanent extends PullError {}

async function fetchPart(job: BlobJob, p: Part, progress: (have: number) => void): Promise<void> {
  const label = job.digest?.slice(0, 19) ?? 'the file';
  const want = p.end === undefined ? job.size : p.end - p.start + 1;
  // Failures in a row; a reply that brought bytes resets it (a dropped connection resumes). Any
  // reply that brought none counts, so a registry answering short or empty cannot loop forever.
  for (let failures = 0; ; ) {
    let have = sizeOf(p.file);
    if (want !== undefined && have > want) {
      tryUnlink(p.file); // longer than its range: not ours to trust
      have = 0;
    }
    if (want !== undefined && have === want) return;
    try {
      const from = p.start + have;
      const range: Record<string, string> = from > 0 || p.end !== undefined ? { range: `bytes=${from}-${p.end ?? ''}` } : {};
      const r = await job.get(range, job.signal);
      if (r.status === 200 && from > 0) {
        // The server ignored the range: only the first part can start over.
        await r.body?.cancel();
        if (p.start > 0) throw new Permanent('the registry does not serve byte ranges', 502);
        tryUnlink(p.file);
        throw new Error('the registry ignored the range; starting over');
      }
      if (r.status !== 200 && r.status !== 206) {
        await r.body?.cancel();
        // The registry's fault, not the request's: a 502, retried unless it is a 4xx.
        const e = `download of ${label}: the registry answered ${r.status} ${r.statusText}`;
        throw r.status >= 500 || r.status === 408 || r.status === 429 ? new Error(e) : new Permanent(e, 502);
      }
      await appendBody(r, p.file, have, progress);
      const now = sizeOf(p.file);
      if (want === undefined || now === want) return;
      if (now > want) throw new Error(`the registry sent ${now - want} bytes more than the blob holds`);
      if (now > have) {
        failures = 0;
        continue;
      }
      throw new Error('the registry sent no bytes');
    } catch (err) {
      if (job.signal?.aborted) throw err;
      if (err instanceof Permanent) throw err;
      // A connection dropped after bringing bytes resumes as if it had not failed.
      if (want !== undefined && sizeOf(p.file) > have && sizeOf(p.file) < want) failures = 0;
      if (++failures > RETRIES) throw new PullError(`download of ${label} failed: ${(err as Error).message}`, 502);
      await sleep(Math.min(200 * 2 ** (failures - 1), 3000));
    }
  }
}

/** Appends the response body to the part file, fsyncing as it goes so a crash loses little. */
async function appendBody(r: Response, file: string, have: number, progress: (have: number) => void): Promise<void> {
  if (!r.body) return;
  const fd = openSync(file, 'a');
  let n = have;
  let sinceSync = 0;
  try {
    const reader = r.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      let off = 0;
      while (off < value.length) off += writeSync(fd, value, off, value.length - off);
      n += value.length;
      sinceSync += value.length;
      if (sinceSync > 16 << 20) {
        fsyncSync(fd);
        sinceSync = 0;
      }
      progress(n);
    }
  } finally {
    fsyncSync(fd);
    closeSync(fd);
  }
}

async function joinAndHash(files: string[], out: string): Promise<string> {
  const h = createHash('sha256');
  const fd = openSync(out, 'w');
  try {
    for (const f of files) {
      for await (const chunk of createReadStream(f, { highWaterMark: 4 << 20 })) {
        h.update(chunk as Buffer);
        let off = 0;
        while (off < (chunk as Buffer).length) off += writeSync(fd, chunk as Buffer, off, (chunk as Buffer).length - off);
      }
    }
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return h.digest('hex');
}

function sizeOf(p: string): number {
  try {
    return statSync(p).size;
  } catch {
    return 0;
  }
}

function tryUnlink(p: string): void {
  try {
    unlinkSync(p);
  } catch {
    // already gone
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
