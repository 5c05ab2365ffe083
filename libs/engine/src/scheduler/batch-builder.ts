import { NativeBatch, NativeModel, NativeSampleRequest, NativeStepResult } from '../backend/native-addon';
import { Sequence } from './sequence';

export interface BuiltBatch {
  batch: NativeBatch;
  samples: NativeSampleRequest[];
  /** The sequence of each sample request, in order. */
  owners: Sequence[];
  /** Prompt tokens in the batch. */
  prefill: number;
  /** Sequences with an entry in the batch. */
  sequences: number;
}

/**
 * One decode step's batch: the next token of every generating sequence first,
 * then chunks of pending prompts. Its buffers live as long as the scheduler
 * (the addon copies them): no per-step allocation.
 */
export class BatchBuilder {
  private readonly tokens: Int32Array;
  private readonly pos: Int32Array;
  private readonly seq: Int32Array;
  private readonly logits: Uint8Array;

  constructor(
    private readonly nBatch: number,
    private readonly nCtxSeq: number,
  ) {
    this.tokens = new Int32Array(nBatch);
    this.pos = new Int32Array(nBatch);
    this.seq = new Int32Array(nBatch);
    this.logits = new Uint8Array(nBatch);
  }

  build(active: Sequence[]): BuiltBatch {
    const cap = this.nBatch;
    const tokens = this.tokens;
    const pos = this.pos;
    const seqIds = this.seq;
    const logits = this.logits.fill(0);
    const samples: NativeSampleRequest[] = [];
    const owners: Sequence[] = [];
    let n = 0;
    let prefill = 0;
    let sequences = 0;
    for (const s of active) {
      if (s.prefilling || n >= cap) continue;
      tokens[n] = s.lastToken;
      pos[n] = s.length - 1;
      seqIds[n] = s.seq;
      logits[n] = 1;
      samples.push(this.sampleRequest(s, n));
      owners.push(s);
      n++;
      sequences++;
    }
    for (const s of active) {
      if (!s.prefilling || n >= cap) continue;
      const prompt = s.spec.promptTokens;
      // Up to the next image (the scheduler writes it between steps) or the prompt's end.
      const take = Math.min(cap - n, s.textEnd - s.nPast);
      for (let i = 0; i < take; i++) {
        tokens[n] = prompt[s.nPast + i];
        pos[n] = s.nPast + i;
        seqIds[n] = s.seq;
        n++;
      }
      s.nPast += take;
      prefill += take;
      if (take > 0) sequences++;
      if (!s.prefilling) {
        logits[n - 1] = 1;
        samples.push(this.sampleRequest(s, n - 1));
        owners.push(s);
      }
    }
    const batch = { tokens: tokens.subarray(0, n), pos: pos.subarray(0, n), seq: seqIds.subarray(0, n), logits: logits.subarray(0, n) };
    return { batch, samples, owners, prefill, sequences };
  }

  /** Budget: tokens the sequence may still take, so a chained step stops where JS would. */
  private sampleRequest(s: Sequence, index: number): NativeSampleRequest {
    const left = Math.min(s.spec.maxTokens - s.generated.length, this.nCtxSeq - s.length - 1);
    const r: NativeSampleRequest = { index, sampler: s.spec.sampler, topLogprobs: topN(s.spec.logprobs), budget: Math.max(1, left), stopOnEog: !s.spec.ignoreEos };
    // Scored at the first answer position only: the one a decision reads.
    if (s.spec.scoreTokens && s.generated.length === 0) r.scoreTokens = s.spec.scoreTokens;
    return r;
  }
}

/** -1 asks for the chosen token's logprob only: one alternative is computed and dropped. */
function topN(logprobs: number): number {
  return logprobs < 0 ? 1 : logprobs;
}

/**
 * The same decoding sequences' next chain, when none of them needs JS first:
 * nobody cancelled, finished, out of budget or at an end token (the caller
 * checks that no request or context operation waits). The batch buffers are
 * reused in place.
 */
export function nextChain(model: NativeModel, batch: NativeBatch, samples: NativeSampleRequest[], owners: Sequence[], r: NativeStepResult): { batch: NativeBatch; samples: NativeSampleRequest[] } | undefined {
  const steps = r.steps ?? 1;
  const n = owners.length;
  if (steps < 1 || n !== batch.tokens.length) return undefined;
  const next: NativeSampleRequest[] = [];
  for (let i = 0; i < n; i++) {
    const s = owners[i];
    const last = r.tokens[(steps - 1) * n + i];
    const budget = (samples[i].budget ?? 1) - steps;
    if (s.finished || s.ending || s.cancelled || budget <= 0 || (samples[i].stopOnEog && model.isEog(last))) return undefined;
    next.push({ ...samples[i], budget });
  }
  for (let i = 0; i < n; i++) {
    batch.tokens[i] = r.tokens[(steps - 1) * n + i];
    batch.pos[i] += steps;
  }
  return { batch, samples: next };
}
