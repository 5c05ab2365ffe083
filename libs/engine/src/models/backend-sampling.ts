import type { BackendName } from '../backend/inference-backend';

/**
 * Whether a context's samplers run in the compute graph (-backend-sampling; llama.cpp's
 * backend sampling) rather than on the CPU.
 *
 * On the CPU path every sampled token copies the whole vocabulary's logits out of the
 * graph (qwen2's 152k entries: 600 KB) and the sampler then builds and sorts a
 * candidate array over all of them; in the graph the same chain (penalties, logit
 * bias, top-k/top-p/min-p, temperature, the final pick) runs where the logits are and
 * only the token comes back. That pays off where the logits live on a GPU. On the CPU
 * itself the graph's version is the slower one (llama-server's `-bs`, 0.5B model,
 * 2 vCPUs: 25–27 against 23–25 ms per token), so `auto` means: every layer, the output
 * layer included, offloaded to a CUDA GPU, and a vocabulary of at least AUTO_MIN_VOCAB
 * tokens. A small vocabulary costs the CPU next to nothing to sample, while graph
 * samplers make llama.cpp re-plan its graphs whenever their count outgrows its node
 * budget (43–66 ms on an H200; native/patches/0004 makes that a doubling, not every
 * chain), and the sampling ops add kernels to every step (stories260K, 512 tokens:
 * 0.39× llama-server's decode with them, H200, before patch 0003). Only CUDA: it is
 * where graph sampling was measured and checked against CPU sampling; on Metal a
 * sampler whose ops the device lacks would leave the rest of its chain to llama.cpp's
 * CPU part, unverified there, so Metal takes it with `on` only. Requests the graph
 * cannot sample (a grammar, top logprobs) are sampled on the CPU, whatever the mode.
 */
export type BackendSamplingMode = 'auto' | 'on' | 'off';

export interface BackendSamplingInput {
  mode: BackendSamplingMode;
  /** The addon in use. */
  backend: BackendName;
  /** -gpu-layers: -1 = all. */
  gpuLayers: number;
  /** Repeating layers of the model. */
  nLayer: number;
  nVocab: number;
}

/** Llama 2's 32000 and up (Qwen's 151936, Llama 3's 128256, Gemma's 262144). */
export const AUTO_MIN_VOCAB = 32000;

export function useBackendSampling(i: BackendSamplingInput): boolean {
  if (i.mode !== 'auto') return i.mode === 'on';
  // llama.cpp offloads the output layer once n_gpu_layers exceeds the repeating layers.
  return i.backend === 'cuda' && (i.gpuLayers < 0 || i.gpuLayers > i.nLayer) && i.nVocab >= AUTO_MIN_VOCAB;
}
