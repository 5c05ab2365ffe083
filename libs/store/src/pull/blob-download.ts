import { createHash } from 'node:crypto';
import { closeSync, createReadStream, fsyncSync, mkdirSync, openSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { renameDurable } from '../atomic-file';
import { changedSince, originFile, rangeOf, readOrigin, recordOrigin } from './part-origin';
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
  /** How long a body may bring no byte before it is dropped and resumed (default STALL_MS). */
  stallMs?: number;
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
  let parts = await fetchAll(job);
  // A plain URL's parallel parts were each checked against their own first reply; a file
  // replaced between them (a part finished before, another started after) would still splice.
  if (job.digest === undefined && !sameOrigin(parts)) {
    parts.forEach((p) => dropPart(p.file));
    parts = await fetchAll(job);
    if (!sameOrigin(parts)) {
      parts.forEach((p) => dropPart(p.file));
      throw new PullError('the file changed while it downloaded (its ranges came with different ETags or sizes); pull it again', 502);
    }
  }
  job.onVerify?.();
  const joined = join(job.partialDir, `${job.key}.joined`);
  const got = await joinAndHash(parts.map((p) => p.file), joined);
  if ((hex !== undefined && got !== hex) || (job.size !== undefined && sizeOf(joined) !== job.size)) {
    tryUnlink(joined);
    parts.forEach((p) => dropPart(p.file));
    throw new PullError(`digest mismatch: expected sha256:${hex}, got sha256:${got}`, 502);
  }
  renameDurable(joined, job.dest(got));
  parts.forEach((p) => dropPart(p.file));
  return got;
}

async function fetchAll(job: BlobJob): Promise<Part[]> {
  try {
    return await fetchParts(job, (job.size ?? 0) > PARALLEL_THRESHOLD ? PARTS : 1);
  } catch (err) {
    if (!(err instanceof NoRanges)) throw err;
    // A server without byte ranges (a plain web server): one download from the start.
    return fetchParts(job, 1);
  }
}

function sameOrigin(parts: Part[]): boolean {
  const o = parts.map((p) => readOrigin(p.file));
  return o.every((x) => x?.validator === o[0]?.validator && x?.total === o[0]?.total);
}

interface Part {
  file: string;
  start: number;
  /** Inclusive end; undefined: to the end of the blob. */
  end?: number;
}

/** A reply that cannot succeed by asking again: the pull fails at once. */
class Permanent extends PullError {}

/** The server answers ranged requests with the whole file. */
class NoRanges extends Permanent {
  constructor() {
    super('the registry does not serve byte ranges', 502);
  }
}

/** A body that brings no byte for this long is a stalled connection: it is dropped and resumed. */
export const STALL_MS = 60_000;

/** Fetches the blob as `nParts` ranges; the first part to fail stops the others (a failed pull downloads nothing more). */
async function fetchParts(job: BlobJob, nParts: number): Promise<Part[]> {
  const total = job.size ?? 0;
  const span = Math.ceil(total / nParts);
  const parts = Array.from({ length: nParts }, (_, i) => ({
    file: join(job.partialDir, nParts === 1 ? `${job.key}.part0` : `${job.key}.part${i}`),
    start: i * span,
    end: nParts === 1 ? undefined : Math.min(total, (i + 1) * span) - 1,
  }));
  if (nParts === 1) for (let i = 1; i < PARTS; i++) tryUnlink(join(job.partialDir, `${job.key}.part${i}`));
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  // A signal aborted already fires no listener: the download would run on, unasked.
  if (job.signal?.aborted) stop.abort();
  job.signal?.addEventListener('abort', onAbort);
  const done = parts.map((p) => sizeOf(p.file));
  const report = () => job.onProgress(done.reduce((a, b) => a + b, 0), total);
  report();
  let first: unknown;
  // Settled, not raced: no part may still be writing when the caller retries or cleans up.
  await Promise.allSettled(
    parts.map((p, i) =>
      fetchPart({ ...job, signal: stop.signal }, p, (n) => ((done[i] = n), report())).catch((err) => {
        first ??= err;
        stop.abort();
      }),
    ),
  );
  job.signal?.removeEventListener('abort', onAbort);
  if (first !== undefined) {
    // A reply that cannot succeed by asking again leaves nothing a later pull could resume.
    if (first instanceof Permanent) for (const p of parts) dropPart(p.file);
    throw first;
  }
  // A zero-byte blob (or part) brings no body: its file still has to exist to be joined.
  for (const p of parts) closeSync(openSync(p.file, 'a'));
  return parts;
}

async function fetchPart(job: BlobJob, p: Part, progress: (have: number) => void): Promise<void> {
  const label = job.digest?.slice(0, 19) ?? 'the file';
  const want = p.end === undefined ? job.size : p.end - p.start + 1;
  // Failures in a row; a reply that took the part further than ever before resets it (a dropped
  // connection resumes). Any other reply counts, so a registry answering short or empty, or one
  // that ignores ranges and drops at the same byte each time (each try starts over), cannot loop forever.
  let furthest = sizeOf(p.file);
  const advanced = (): boolean => {
    const now = sizeOf(p.file);
    if (now <= furthest) return false;
    furthest = now;
    return true;
  };
  // A server that ignored a range once will not resume this part later either.
  let rangesIgnored = false;
  for (let failures = 0; ; ) {
    let have = sizeOf(p.file);
    if (want !== undefined && have > want) {
      dropPart(p.file); // longer than its range: not ours to trust
      have = 0;
    }
    // A plain URL has no digest to catch a file replaced between two tries: a part resumes only
    // under If-Range with the validator its first bytes came with, and only while the file
    // still has the size it had then (else it starts over).
    let origin = job.digest === undefined && have > 0 ? readOrigin(p.file) : undefined;
    if (job.digest === undefined && have > 0 && (!origin || (origin.total !== undefined && job.size !== undefined && origin.total !== job.size))) {
      dropPart(p.file);
      have = 0;
      origin = undefined;
    }
    if (want !== undefined && have === want) return;
    try {
      const from = p.start + have;
      const range: Record<string, string> = from > 0 || p.end !== undefined ? { range: `bytes=${from}-${p.end ?? ''}` } : {};
      if (origin) range['if-range'] = origin.validator;
      const r = await job.get(range, job.signal);
      // A server that ignores If-Range answers 206 from whatever file it has now: those bytes
      // are checked against the part's origin, never trusted, and a changed file starts over.
      if (origin && r.status === 206 && changedSince(origin, r.headers, from)) {
        await r.body?.cancel();
        dropPart(p.file);
        continue;
      }
      if (r.status === 200 && (from > 0 || p.end !== undefined)) {
        // The server ignored the range: a whole-file download can start over, a part cannot.
        await r.body?.cancel();
        if (p.end !== undefined) throw new NoRanges();
        rangesIgnored = true;
        dropPart(p.file);
        throw new Error('the registry ignored the range; starting over');
      }
      if (r.status === 416 && want === undefined && have > 0) {
        // Size unknown and the connection dropped after the last byte: nothing is left to send,
        // unless the file's size (now or at the first byte) says the part is not the whole of it.
        await r.body?.cancel();
        const now = rangeOf(r.headers)?.total;
        if ((now === undefined || now === have) && (origin?.total === undefined || origin.total === have)) return;
        dropPart(p.file);
        continue;
      }
      if (r.status !== 200 && r.status !== 206) {
        await r.body?.cancel();
        // The registry's fault, not the request's: a 502, retried unless it is a 4xx.
        const e = `download of ${label}: the registry answered ${r.status} ${r.statusText}`;
        throw r.status >= 500 || r.status === 408 || r.status === 429 ? new Error(e) : new Permanent(e, 502);
      }
      if (job.digest === undefined && have === 0) recordOrigin(p.file, r);
      await appendBody(r, p.file, have, progress, want, job.stallMs ?? STALL_MS);
      const now = sizeOf(p.file);
      if (want === undefined || now === want) return;
      if (advanced()) {
        failures = 0;
        continue;
      }
      throw new Error(now > have ? `the body ended at byte ${now} of ${want} again` : 'the registry sent no bytes');
    } catch (err) {
      if (job.signal?.aborted) throw err;
      if (err instanceof Permanent) throw err;
      // A connection dropped after taking the part further resumes as if it had not failed.
      if (want !== undefined && sizeOf(p.file) < want && advanced()) failures = 0;
      if (++failures > RETRIES) {
        // Kept for the next pull to resume, unless it never could: a plain URL's part resumes only under its validator.
        if (rangesIgnored || (job.digest === undefined && readOrigin(p.file) === undefined)) dropPart(p.file);
        throw new PullError(`download of ${label} failed: ${(err as Error).message}`, 502);
      }
      await sleep(Math.min(200 * 2 ** (failures - 1), 3000));
    }
  }
}

/**
 * Appends the response body to the part file, fsyncing as it goes so a crash
 * loses little. Never past `want` bytes (a registry sending more than the
 * manifest declares would fill the disk): the part is deleted and the pull fails.
 */
async function appendBody(r: Response, file: string, have: number, progress: (have: number) => void, want: number | undefined, stallMs: number): Promise<void> {
  if (!r.body) return;
  const fd = openSync(file, 'a');
  let n = have;
  let sinceSync = 0;
  let over = false;
  try {
    const reader = r.body.getReader();
    for (;;) {
      const { done, value } = await readWithin(reader, stallMs);
      if (done) break;
      if (want !== undefined && n + value.length > want) {
        over = true;
        await reader.cancel().catch(() => undefined);
        break;
      }
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
  if (over) {
    dropPart(file);
    throw new Permanent(`the registry sent more bytes than the ${want} the manifest declares`, 502);
  }
}

/** One read, or an error once `ms` pass without a byte (the reader is cancelled, so the request resumes). */
async function readWithin(reader: ReadableStreamDefaultReader<Uint8Array>, ms: number): ReturnType<ReadableStreamDefaultReader<Uint8Array>["read"]> {
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      void reader.cancel().catch(() => undefined);
      reject(new Error(`no bytes for ${ms / 1000} s`));
    }, ms);
  });
  try {
    return await Promise.race([reader.read(), stalled]);
  } finally {
    clearTimeout(timer);
  }
}

/** A part file and the origin (validator, size) its first bytes came with. */
function dropPart(file: string): void {
  tryUnlink(file);
  tryUnlink(originFile(file));
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
