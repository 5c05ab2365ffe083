import { NativeContext, NativeStepTokens } from '../backend/native-addon';
import { InvalidRequestError } from '../core/errors';
import { SchedulerStats } from './scheduler-stats';
import { Sequence } from './sequence';

/**
 * Hands decoded tokens to their sequences, from a step's result or from a
 * streaming chain's delivery, and sends `done` once a finished sequence's KV is
 * settled. Sequences that finish leave the scheduler's `active` list.
 */
export class TokenIntake {
  constructor(
    private readonly stats: SchedulerStats,
    private readonly active: Sequence[],
    private readonly nCtxSeq: number,
    private readonly ctx: NativeContext,
  ) {}

  /** Sends `done` for a sequence that ended (nothing for one cancelled or failed). */
  complete(s: Sequence): void {
    if (!s.ending) return;
    s.finish(s.ending.reason, s.ending.stop, s.ending.at);
    this.stats.recordFinish({
      ttftMs: s.firstTokenAt - s.queuedAt,
      promptTokens: s.spec.promptTokens.length,
      cachedTokens: s.cachedTokens,
      completionTokens: s.generated.length,
    });
  }

  /**
   * A streaming chain's steps so far, handled at once; a sequence that ends here
   * (a stop string) ends the chain. Returns what accept threw, to rethrow once
   * the chain is over.
   */
  delivered(d: NativeStepTokens, owners: Sequence[], batchTokens: number, sequences: number, finished: Sequence[]): unknown {
    const before = finished.length;
    this.stats.streamedSteps += d.steps;
    try {
      this.accept(d, owners, batchTokens, sequences, 0, finished);
    } catch (err) {
      this.ctx.requestYield();
      return err;
    }
    if (finished.length > before) this.ctx.requestYield();
    return undefined;
  }

  /** Hands a step's tokens to their sequences; the ones that finish leave `active` and go to `finished`. */
  accept(result: NativeStepTokens, owners: Sequence[], batchTokens: number, sequences: number, prefill: number, finished: Sequence[]): void {
    // 0 when a streaming chain handed every step over already.
    const steps = result.steps ?? 1;
    this.stats.sampleUs += result.sampleUs ?? 0;
    for (let k = 0; k < steps; k++) {
      this.stats.recordStep(batchTokens, sequences, k === 0 ? prefill : 0, owners.length, result.decodeUs / steps);
    }
    const now = performance.now();
    const n = owners.length;
    for (let k = 0; k < steps; k++) {
      for (let i = 0; i < n; i++) {
        const s = owners[i];
        if (s.finished || s.ending || s.cancelled) continue;
        const token = result.tokens[k * n + i];
        if (token < 0) {
          // The engine could not sample for it (see step.cpp sampleAll): it fails alone.
          s.fail(new InvalidRequestError('the output constraint allows no token at this point: the grammar or schema cannot be satisfied'));
          this.active.splice(this.active.indexOf(s), 1);
          finished.push(s);
          continue;
        }
        const r = s.accept(token, result.logprobs[k * n + i] ?? null, this.nCtxSeq);
        this.stats.generatedTokens++;
        if (r.finish) {
          s.ending = { reason: r.finish, stop: r.stop, at: now };
          this.active.splice(this.active.indexOf(s), 1);
          finished.push(s);
        }
      }
    }
  }
}
