import { NativeBatch, NativeContext, NativeStepOptions, NativeStepResult } from '../backend/native-addon';
import { InvalidRequestError } from '../core/errors';
import { BuiltBatch } from './batch-builder';
import { Sequence } from './sequence';

/**
 * The running sequences whose first position in `batch` does not follow the last cell the KV
 * cache holds for them. llama.cpp refuses a whole batch over one such sequence (before it
 * computes anything), so a context restored from a state that does not match its tokens
 * failed every request in the step; found this way, only its own request fails.
 */
export function discontinuousSequences(ctx: NativeContext, batch: NativeBatch, active: Sequence[]): Sequence[] {
  const first = new Map<number, number>();
  for (let i = 0; i < batch.tokens.length; i++) if (!first.has(batch.seq[i])) first.set(batch.seq[i], batch.pos[i]);
  return active.filter((s) => s.seq >= 0 && first.has(s.seq) && ctx.seqPosMax(s.seq) + 1 !== first.get(s.seq));
}

/**
 * The same step without the entries of `drop`'s sequences (sample indices renumbered), so it
 * can be decoded at once: building a batch advances its requests' prompt progress. Call it
 * before they are released (which takes their sequence ids).
 */
export function withoutSequences(built: BuiltBatch, drop: Sequence[]): BuiltBatch {
  const gone = new Set(drop.map((s) => s.seq));
  const { batch, samples, owners } = built;
  const keep: number[] = [];
  for (let i = 0; i < batch.tokens.length; i++) if (!gone.has(batch.seq[i])) keep.push(i);
  const newIndex = new Map(keep.map((old, i) => [old, i]));
  const pick = <T extends Int32Array | Uint8Array>(a: T): T => {
    const out = new (a.constructor as new (n: number) => T)(keep.length);
    keep.forEach((old, i) => (out[i] = a[old]));
    return out;
  };
  const kept = owners.map((s, i) => [s, samples[i]] as const).filter(([s]) => !gone.has(s.seq));
  // (stats only: a dropped sequence's entries are counted as prompt tokens)
  const prefill = built.prefill - (batch.tokens.length - keep.length);
  return {
    batch: { tokens: pick(batch.tokens), pos: pick(batch.pos), seq: pick(batch.seq), logits: pick(batch.logits) },
    samples: kept.map(([, r]) => ({ ...r, index: newIndex.get(r.index)! })),
    owners: kept.map(([s]) => s),
    prefill: Math.max(0, prefill),
    sequences: new Set(keep.map((i) => batch.seq[i])).size,
  };
}


/**
 * After llama.cpp refused a step (status < 0): when the cause is sequences whose cells do not
 * continue their tokens (a context restored from a damaged state), those requests fail alone
 * (`drop` takes them out of the running set) and the rest decode at once. Undefined when no
 * sequence is at fault (the refusal stands); `result` is undefined when nothing is left to decode.
 */
export async function retryWithoutDamaged(
  ctx: NativeContext,
  built: BuiltBatch,
  active: Sequence[],
  opts: NativeStepOptions,
  drop: (s: Sequence) => void,
): Promise<{ built: BuiltBatch; result?: NativeStepResult } | undefined> {
  const bad = discontinuousSequences(ctx, built.batch, active);
  if (bad.length === 0) return undefined;
  const rest = withoutSequences(built, bad);
  for (const s of bad) {
    s.fail(new InvalidRequestError("this context's KV state does not continue its tokens (a damaged snapshot or import): restore it from a good file or delete it"));
    drop(s);
  }
  if (rest.batch.tokens.length === 0) return { built: rest };
  return { built: rest, result: await ctx.step(rest.batch, rest.samples, opts) };
}
