/** A loaded model or encoder that requests hold while they use it: busy meanwhile, last used when let go. */
export interface Holdable {
  holds: number;
  lastUsed: number;
}

/** Runs fn with `h` held, then marks it used now (keep_alive counts from the end of its last use). */
export async function holding<T>(h: Holdable, fn: () => Promise<T>): Promise<T> {
  h.holds++;
  try {
    return await fn();
  } finally {
    h.holds--;
    h.lastUsed = Date.now();
  }
}
