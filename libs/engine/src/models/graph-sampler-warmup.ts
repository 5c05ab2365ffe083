import type { NativeContext, NativeSamplerOptions } from '../backend/native-addon';

/**
 * The chain the warm-up binds: top-k, top-p, temperature and a repeat penalty, 70 graph
 * nodes with a qwen2 vocabulary, more than the usual ones (an option-less request 47,
 * greedy 52, OpenAI's defaults 46), so the node budget it leaves holds those too. Chains
 * with a logit bias or several penalties run to ~80: enough of them re-plan once more.
 */
const WARM_CHAIN: NativeSamplerOptions = { temperature: 0.8, topK: 40, topP: 0.9, repeatPenalty: 1.1, repeatLastN: 64 };

/**
 * With sampling in the compute graph, binds a chain on every chain slot at load.
 * llama.cpp re-plans all its graphs (43–66 ms on an H200) when the bound chains outgrow
 * its node budget, then leaves room for twice as many (patch 0004): a fresh server
 * re-planned on its 1st, 3rd, 7th, 15th and 31st sequence to bind a chain; here the few
 * plans happen at load. Steps of at most `rowsPerStep` entries (the server's concurrency):
 * llama.cpp's output buffer keeps the most rows any step asked for (16 bytes per
 * vocabulary entry each with graph sampling, 2.4 MB for qwen2), so no more than requests
 * reach anyway. The chains stay bound (a request with that configuration takes one over;
 * least recently used ones give way); the sequences' cells go.
 * Returns the number of chains bound (0 without graph sampling).
 */
export async function warmGraphSamplers(ctx: NativeContext, slots: number, rowsPerStep: number, token: number): Promise<number> {
  if (!ctx.backendSampling || slots <= 0) return 0;
  const step = Math.max(1, rowsPerStep);
  // One sampler per row: step() refuses one sampler twice in a call (it would be sampled twice).
  const samplers = Array.from({ length: Math.min(step, slots) }, () => ctx.createSampler(WARM_CHAIN));
  let bound = 0;
  try {
    for (let s0 = 0; s0 < slots; s0 += step) {
      const seqs = Array.from({ length: Math.min(step, slots - s0) }, (_, i) => s0 + i);
      const batch = { tokens: Int32Array.from(seqs, () => token), pos: Int32Array.from(seqs, () => 0), seq: Int32Array.from(seqs), logits: Uint8Array.from(seqs, () => 1) };
      const r = await ctx.step(batch, seqs.map((_, index) => ({ index, sampler: samplers[index], topLogprobs: 0 }))).finally(() => {
        for (const s of seqs) ctx.seqRemove(s, -1, -1);
      });
      if (r.status !== 0) break;
      bound += seqs.length;
    }
    return bound;
  } finally {
    for (const x of samplers) x.dispose();
  }
}
