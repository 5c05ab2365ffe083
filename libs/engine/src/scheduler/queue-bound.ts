import { QueueFullError } from '../core/errors';
import { SchedulerStats } from './scheduler-stats';
import { Sequence } from './sequence';

/**
 * The queue bound, in requests: -concurrency plus -queue of them may be running or waiting; past
 * it, 429. A request that runs several sequences (a decision: its state's prefill, then a fork
 * per question) holds one place through reserve() and submits them `reserved`: counted per
 * sequence, 60 decisions of 3 questions were refused far below the bound.
 */
export class QueueBound {
  /** Places held through reserve(). */
  private tickets = 0;

  constructor(
    private readonly limit: number,
    private readonly active: readonly Sequence[],
    private readonly queue: readonly Sequence[],
    private readonly stats: SchedulerStats,
  ) {}

  /** Throws QueueFullError when no place is left (a burst lands in the queue before the loop admits any of it). */
  check(): void {
    let n = this.tickets;
    for (const s of this.active) if (!s.spec.reserved) n++;
    for (const s of this.queue) if (!s.spec.reserved) n++;
    if (n >= this.limit) {
      this.stats.rejected++;
      throw new QueueFullError();
    }
  }

  /** Holds one place; the returned function gives it back (once). */
  reserve(): () => void {
    this.check();
    this.tickets++;
    let held = true;
    return () => {
      if (held) this.tickets--;
      held = false;
    };
  }
}
