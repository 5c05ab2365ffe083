/**
 * A single-consumer async queue: the scheduler pushes, a dialect iterates.
 * Breaking out of the loop (client gone) calls onCancel so the scheduler can
 * free the sequence at its next step.
 */
export class EventChannel<T> implements AsyncIterable<T> {
  private readonly buffer: T[] = [];
  private wake?: () => void;
  private closed = false;
  private failure?: unknown;
  onCancel?: () => void;

  push(value: T): void {
    if (this.closed) return;
    this.buffer.push(value);
    this.notify();
  }

  close(): void {
    this.closed = true;
    this.notify();
  }

  fail(err: unknown): void {
    if (this.closed) return;
    this.failure = err;
    this.close();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    let finished = false;
    try {
      for (;;) {
        if (this.buffer.length > 0) {
          yield this.buffer.shift() as T;
          continue;
        }
        if (this.closed) {
          if (this.failure !== undefined) throw this.failure;
          finished = true;
          return;
        }
        await new Promise<void>((resolve) => (this.wake = resolve));
      }
    } finally {
      if (!finished && this.failure === undefined) this.onCancel?.();
    }
  }
}
