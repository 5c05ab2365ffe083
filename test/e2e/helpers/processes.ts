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

/** The pid a command wrote to `file` (echo $$ > file), waited for up to 5 s; 0 if it never came. */
export async function pidFromFile(file: string): Promise<number> {
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 50));
    try {
      const pid = Number(readFileSync(file, 'utf8').trim());
      if (pid) return pid;
    } catch {
      // not written yet
    }
  }
  return 0;
}
