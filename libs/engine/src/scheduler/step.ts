import { NativeContext, NativeModel, NativeStepOptions } from '../backend/native-addon';
import { BatchBuilder, nextChain } from './batch-builder';
import { retryWithoutDamaged } from './batch-faults';
import { KvPressure } from './kv-pressure';
import { SchedulerOptions } from './scheduler-options';
import { SchedulerStats } from './scheduler-stats';
import { Sequence } from './sequence';
import { TokenIntake } from './token-intake';

/** What one decode step reads and changes of its scheduler. */
export interface StepHost {
  readonly model: NativeModel;
  readonly ctx: NativeContext;
  readonly opts: SchedulerOptions;
  readonly stats: SchedulerStats;
  readonly batches: BatchBuilder;
  readonly intake: TokenIntake;
  readonly pressure: KvPressure;
  /** The running sequences (the scheduler's own array: a failed one is taken out of it here). */
  readonly active: Sequence[];
  /** Requests waiting for admission, and KV operations waiting for the lock: either keeps a chain short. */
  queued(): number;
  kvWaiting(): number;
  release(s: Sequence, retain: boolean): void;
}

/**
 * One decode step of the running sequences: a batch built from them, decoded (chained natively
 * and pipelined when only decoding sequences are in it), its tokens handed to their requests,
 * and the sequences that finished released once their KV is settled.
 */
export async function runStep(h: StepHost): Promise<void> {
  const built = h.batches.build(h.active);
  let { batch, samples, owners, prefill, sequences } = built;
  if (batch.tokens.length === 0) return;
  // A batch of decoding sequences alone may run several steps natively; new
  // requests (submit) and cancels end the chain early via requestYield().
  // Nor while a KV operation waits (a context's creation or binding): its yield request may
  // have come before this step began, which clears it, and it would wait out the whole chain.
  const canChain = prefill === 0 && h.kvWaiting() === 0 && (h.queued() === 0 || h.active.length >= h.opts.concurrency);
  const streaming = canChain && (h.opts.streamMs ?? -1) >= 0;
  // Finished sequences are released once no chain is in flight (their KV is trimmed then).
  const finished: Sequence[] = [];
  let failure: unknown;
  const opts: NativeStepOptions = streaming
    ? { maxSteps: 1024, maxMs: 1000, streamMs: h.opts.streamMs, onTokens: (d) => (failure ??= h.intake.delivered(d, owners, batch.tokens.length, sequences, finished)) }
    : { maxSteps: canChain ? (h.opts.chainSteps ?? 64) : 1, maxMs: h.opts.chainMs ?? 24 };
  let result = await h.ctx.step(batch, samples, opts);
  if (result.status < 0) {
    const retried = await retryWithoutDamaged(h.ctx, built, h.active, opts, (s) => {
      h.active.splice(h.active.indexOf(s), 1);
      h.release(s, false);
    });
    if (retried) {
      if (!retried.result) return;
      ({ batch, samples, owners, prefill, sequences } = retried.built);
      result = retried.result;
    }
  }
  while (result.status === 1) {
    // KV full (nothing was decoded): free cells (KvPressure says how) and retry the same batch.
    if (await h.pressure.relieve()) {
      result = await h.ctx.step(batch, samples, opts);
      continue;
    }
    // Nothing left to free: one request makes room for the others, which go on. The next
    // step is built without it.
    h.pressure.preemptNewest();
    return;
  }
  // A chain still decoding when handling tokens threw: settled before anything is released under it.
  let unsettled: Promise<unknown> | undefined;
  try {
    if (result.status !== 0) throw new Error(`llama_decode failed with status ${result.status}`);
    if (failure) throw failure;
    let first = true;
    for (;;) {
      // Pipelining: the next chain of the same decoding sequences starts before
      // JS handles this one's tokens, so the engine does not wait on JS.
      const next = canChain && !streaming && h.opts.pipeline && h.queued() === 0 && h.kvWaiting() === 0 ? nextChain(h.model, batch, samples, owners, result) : undefined;
      const inflight = next ? h.ctx.step(next.batch, next.samples, opts) : undefined;
      if (inflight) h.stats.pipelinedChains++;
      unsettled = inflight;
      if (canChain && (result.idleUs ?? -1) >= 0) h.stats.decodeIdleUs += result.idleUs!;
      h.intake.accept(result, owners, batch.tokens.length, sequences, first ? prefill : 0, finished);
      first = false;
      if (!inflight || !next) break;
      // A stop string ended a sequence: the chain in flight decodes for it in vain, end it soon.
      if (finished.length > 0) h.ctx.requestYield();
      const r = await inflight;
      unsettled = undefined;
      // KV full (nothing was decoded): the next iteration's fresh batch deals with it.
      if (r.status !== 0) break;
      ({ batch, samples } = next);
      result = r;
    }
  } finally {
    if (unsettled) {
      h.ctx.requestYield();
      await unsettled.catch(() => undefined);
    }
    // Their last tokens go out first: the renderers run before the bookkeeping
    // below (trimming, retaining, evicting), which the client need not wait for.
    if (finished.length > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    // `done` goes out once the sequence's KV is settled (a streaming chain ends
    // after sequences that finished mid-chain): a client that reacts to it at
    // once (deleting its context) finds the context free.
    for (const s of finished) {
      h.intake.complete(s);
      h.release(s, true);
    }
    if (finished.length > 0) h.pressure.holdAdmissions = false;
  }
}
