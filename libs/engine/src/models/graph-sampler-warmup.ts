import type { NativeContext, NativeSamplerOptions } from '../backend/native-addon';

/**
 * The chain the warm-up binds: the local-runner dialect's defaults, the longest of the
 * usual configurations in graph nodes (70 with a qwen2 vocabulary, against 46–52 for
 * OpenAI's defaults or greedy), so the budget it leaves holds the others too.
 */
const WARM_CHAIN: NativeSamplerOptions = { temperature: 0.8, topK: 40, topP: 0.9, repeatPenalty: 1.1, repeatLastN: 64 };

/**
 * With sampling in the compute graph, binds a chain on half of the context's chain slots
 * in one step, at load. llama.cpp re-plans all its graphs (43–66 ms on an H200) when the
 * bound chains outgrow its node budget and then leaves room for twice as many (patch
 * 0004), so a fresh server re-planned on its 1st, 3rd, 7th and 15th sequence to bind a
 * chain; after this one planning, as many chains as the slots hold fit. The chains stay
 * bound (requests with that configuration take them over); the sequences' cells go.
 * Returns the number of chains bound (0 without graph sampling).
 */
export async function warmGraphSamplers(ctx: NativeContext, slots: number, token: number): Promise<number> {
  const n = Math.ceil(slots / 2);
  if (!ctx.backendSampling || n <= 0) return 0;
  const sampler = ctx.createSampler(WARM_CHAIN);
  const seqs = Array.from({ length: n }, (_, s) => s);
  try {
    const r = await ctx.step(
      { tokens: Int32Array.from(seqs, () => token), pos: Int32Array.from(seqs, () => 0), seq: Int32Array.from(seqs), logits: Uint8Array.from(seqs, () => 1) },
      seqs.map((index) => ({ index, sampler, topLogprobs: 0 })),
    );
    return r.status === 0 ? n : 0;
  } finally {
    for (const s of seqs) ctx.seqRemove(s, -1, -1);
    sampler.dispose();
  }
}
