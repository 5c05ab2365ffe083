/**
 * FIFO async mutex over one context's KV cache: a decode step and a KV
 * operation (fork, truncate, state read/write) never overlap.
 */
export class KvLock {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(fn: () => T | Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.catch(() => undefined);
    return result;
  }
}
