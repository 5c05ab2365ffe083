import { readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { processAlive } from '../process-files';

/** How often a pull waiting for another process's download of the same blob looks again. */
const WAIT_MS = 500;

/**
 * Runs `fn` while this process holds `partial/<key>.lock`. Two processes on one store (two
 * `svc pull`s, a server and a pull) appended to the same part file and both failed; one of them
 * now waits for the other's download (and then usually finds the blob there). A lock whose
 * process is gone is taken over.
 */
export async function withDownloadLock<T>(partialDir: string, key: string, signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T> {
  const path = join(partialDir, `${key}.lock`);
  for (;;) {
    signal?.throwIfAborted();
    try {
      writeFileSync(path, String(process.pid), { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = readPid(path);
    if (holder === undefined) continue; // released meanwhile
    if (!processAlive(holder)) {
      dropIfStill(path, holder);
      continue;
    }
    await sleep(WAIT_MS, undefined, { signal });
  }
  try {
    return await fn();
  } finally {
    dropIfStill(path, process.pid);
  }
}

function readPid(path: string): number | undefined {
  try {
    return Number(readFileSync(path, 'utf8').trim()) || 0;
  } catch {
    return undefined;
  }
}

/** Removes the lock only while it still names `pid` (another process may have taken it since). */
function dropIfStill(path: string, pid: number): void {
  if (readPid(path) !== pid) return;
  try {
    unlinkSync(path);
  } catch {
    // gone already
  }
}
