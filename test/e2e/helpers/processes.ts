import { readFileSync } from 'node:fs';

/** True once the process is gone (or a zombie nobody reaped yet: it runs nothing). */
export function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    return /^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}

/** Waits up to 3 s for the process to be gone. */
export async function eventuallyGone(pid: number): Promise<boolean> {
  for (let i = 0; i < 60 && !gone(pid); i++) await new Promise((r) => setTimeout(r, 50));
  return gone(pid);
}
