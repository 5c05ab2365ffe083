import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';

/**
 * Crash safety for the store: a file becomes visible only by rename(2) of a
 * complete, fsynced temp file in the same directory, and the directory is
 * fsynced after so the rename itself survives power loss. A kill -9 at any
 * moment leaves either the old file or the new one, never half of one; at
 * worst a `.tmp-*` file that readers ignore. A write that fails (a full disk)
 * removes its temp file: nothing else would, and each failure left more behind.
 */
export function writeFileAtomic(path: string, data: string | Buffer): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true });
  const tmp = join(dir, `.tmp-${basename(path)}-${randomBytes(6).toString('hex')}`);
  const fd = openSync(tmp, 'w', 0o644);
  try {
    try {
      const buf = typeof data === 'string' ? Buffer.from(data) : data;
      let off = 0;
      while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
  fsyncDir(dir);
}

/**
 * writeFileAtomic off the event loop, for large files written while requests are served (the
 * retrieval index): the same steps (temp file, fsync, rename, directory fsync), awaited. The data
 * may come in pieces, written in turn, so a file larger than one buffer can hold is never one.
 */
export async function writeFileAtomicAsync(path: string, data: Buffer | Iterable<Buffer>): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  const tmp = join(dir, `.tmp-${basename(path)}-${randomBytes(6).toString('hex')}`);
  try {
    const fh = await open(tmp, 'w', 0o644);
    try {
      for (const piece of Buffer.isBuffer(data) ? [data] : data) {
        for (let off = 0; off < piece.length; ) off += (await fh.write(piece, off, piece.length - off)).bytesWritten;
      }
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  fsyncDir(dir);
}

/** Moves a complete, already fsynced file into place, then persists the rename. */
export function renameDurable(from: string, to: string): void {
  mkdirSync(dirname(to), { recursive: true });
  renameSync(from, to);
  fsyncDir(dirname(to));
}

export function fsyncFile(path: string): void {
  const fd = openSync(path, 'r+');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export function fsyncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // Some file systems refuse fsync on a directory; the rename is still atomic.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Removes the temp files that writes of `path` left when the process was killed mid-write (each
 * crash left one, as large as the file). Only those untouched for `olderMs`: another process
 * writing the same file now keeps its own.
 */
export function sweepTempFiles(path: string, olderMs = 10 * 60_000): number {
  const dir = dirname(path);
  const prefix = `.tmp-${basename(path)}-`;
  let removed = 0;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    try {
      if (Date.now() - statSync(join(dir, name)).mtimeMs < olderMs) continue;
      rmSync(join(dir, name), { force: true });
      removed++;
    } catch {
      // Gone already, or not ours to remove: the next start tries again.
    }
  }
  return removed;
}
