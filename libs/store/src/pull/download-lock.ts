import { randomUUID } from 'node:crypto';
import { readFileSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** How often a pull waiting for another process's download of the same blob looks again. */
const WAIT_MS = 500;
/** A holder touches its lock (and a pull its pin files) this often while it holds them. */
export const HEARTBEAT_MS = 5_000;
/** A lock or pin untouched this long belongs to a process that is gone. */
export const STALE_LOCK_MS = 30_000;

/**
 * Runs `fn` while this process holds `partial/<key>.lock`. Two processes on one store (two
 * `svc pull`s, a server and a pull) appended to the same part file and both failed; one of them
 * now waits for the other's download (and then usually finds the blob there). The lock names its
 * holder by a random token and is kept fresh by a heartbeat: a lock untouched for STALE_LOCK_MS
 * is taken over. A process id was not enough: a restarted container's node is pid 1 again, and
 * processes in two pid namespaces cannot see each other.
 */
export async function withDownloadLock<T>(partialDir: string, key: string, signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T> {
  const path = join(partialDir, `${key}.lock`);
  const token = newToken();
  for (;;) {
    signal?.throwIfAborted();
    try {
      writeFileSync(path, token, { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const held = lockState(path);
    if (held === undefined) continue; // released meanwhile
    // An empty file is a holder between creating and writing it: fresh, so waited for.
    if (held.age > STALE_LOCK_MS) {
      dropIfStill(path, held.token);
      continue;
    }
    await sleep(WAIT_MS, undefined, { signal });
  }
  const beat = setInterval(() => touch(path), HEARTBEAT_MS);
  beat.unref();
  try {
    return await fn();
  } finally {
    clearInterval(beat);
    dropIfStill(path, token);
  }
}

/** A token naming one holder: host, process and a random part (unique across hosts and pid namespaces). */
export function newToken(): string {
  return `${hostname()}-${process.pid}-${randomUUID()}`;
}

/** The file's content and how long ago it was last written or touched; undefined when it is gone. */
export function lockState(path: string): { token: string; age: number } | undefined {
  try {
    const age = Date.now() - statSync(path).mtimeMs;
    return { token: readFileSync(path, 'utf8'), age };
  } catch {
    return undefined;
  }
}

export function touch(path: string): void {
  const now = new Date();
  try {
    utimesSync(path, now, now);
  } catch {
    // gone (taken over after a stall): the holder goes on; the next pull verifies by digest anyway
  }
}

/** Removes the lock only while it still holds `token` (another process may have taken it since). */
function dropIfStill(path: string, token: string): void {
  if (lockState(path)?.token !== token) return;
  try {
    unlinkSync(path);
  } catch {
    // gone already
  }
}
