import { KvFullError } from '../core/errors';
import { PrefixCache } from './prefix-cache';
import { SamplerPool } from './sampler-pool';
import { SchedulerStats } from './scheduler-stats';
import { Sequence } from './sequence';

/**
 * What a step does when the KV cache is full, cheapest first: give back retained prompts, spill
 * idle contexts (the contexts registry's hook), let go of a queued request's context; and with
 * nothing left to free, refuse one running request so the others go on (a full cache failed
 * every request in flight).
 */
export class KvPressure {
  /** The contexts registry's hook: spills one idle context; false when there is none. */
  spillIdleContext?: () => Promise<boolean>;
  /**
   * Set by a preemption until a running request ends: admitting the next queued request into the
   * freed sequence would fill the cache again and refuse it too, one by one down the queue.
   */
  holdAdmissions = false;

  constructor(
    private readonly cache: PrefixCache,
    private readonly queue: Sequence[],
    private readonly active: Sequence[],
    private readonly samplers: SamplerPool,
    private readonly stats: SchedulerStats,
    private readonly release: (s: Sequence) => void,
  ) {}

  /** Frees cells without failing a running request; false when nothing could be freed. */
  async relieve(): Promise<boolean> {
    return (await this.cache.relieve()) || (await this.spillIdleContext?.()) || this.unpinQueuedSession();
  }

  /** Refuses (503) the most recently admitted request, preferring one that has sent nothing yet. */
  preemptNewest(): void {
    let at = -1;
    for (let i = this.active.length - 1; i >= 0 && at < 0; i--) if (this.active[i].generated.length === 0) at = i;
    if (at < 0) at = this.active.length - 1;
    const [victim] = this.active.splice(at, 1);
    victim.fail(kvFull('the running requests filled it first'));
    this.stats.rejected++;
    this.release(victim);
    this.holdAdmissions = this.active.length > 0;
  }

  /**
   * A queued request on a context holds that context's cells from its bind until it runs, where
   * they cannot be spilled: the newest such request is refused (503) and its context left idle,
   * for the next relief to spill.
   */
  private unpinQueuedSession(): boolean {
    for (let i = this.queue.length - 1; i >= 0; i--) {
      const q = this.queue[i];
      if (!q.spec.session) continue;
      this.queue.splice(i, 1);
      this.samplers.give(q.spec.sampler);
      q.spec.session.onRelease(q.spec.session.held, false);
      q.fail(kvFull('its context could not stay loaded while the running requests needed the cells'));
      this.stats.rejected++;
      return true;
    }
    return false;
  }
}

function kvFull(why: string): KvFullError {
  return new KvFullError(why);
}
