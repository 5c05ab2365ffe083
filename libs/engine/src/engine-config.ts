import { DEFAULT_KEEP_ALIVE_MS } from './models/residency';

/** Engine settings, from the startup flags (apps/server/src/config). */
export interface EngineConfig {
  /** Threads for single-token decode and for prompt batches. */
  threads: number;
  threadsBatch: number;
  /** Sequences generating at once (-concurrency). */
  concurrency: number;
  /** Requests waiting beyond concurrency before 429 (-queue). */
  queueLimit: number;
  /** Positions per request; 0 = the model's training context, capped at 4096 (-ctx-size). */
  ctxSize: number;
  /** Tokens per decode call (-batch-size). */
  batchSize: number;
  /** Layers on the GPU (-gpu-layers; -1 = all). */
  gpuLayers: number;
  /** Retained prompts kept for prefix reuse (prefix cache entries). */
  cacheSlots: number;
  /** MiB of host memory for retained prompts moved out of the KV cache (-cache-ram). */
  cacheRamMiB: number;
  /** KV contexts resident at once; more are spilled to disk. */
  contextSlots: number;
  flashAttn: 'auto' | 'on' | 'off';
  /** Weights and KV cache on 2 MiB pages (-huge-pages; models/huge-pages.ts). */
  hugePages: 'auto' | 'on' | 'off';
  /** Samplers run in the compute graph (-backend-sampling; models/backend-sampling.ts). */
  backendSampling: 'auto' | 'on' | 'off';
  /** Bytes resident models may take together (-memory-budget); 0 = total memory minus 2 GiB. */
  memoryBudget: number;
  /** keep_alive of a local-runner request that names none (-keep-alive; ms, Infinity = forever). */
  keepAliveMs: number;
}

export const ENGINE_CONFIG = Symbol('ENGINE_CONFIG');

export function defaultEngineConfig(cpus: number): EngineConfig {
  return {
    threads: Math.max(1, cpus),
    threadsBatch: Math.max(1, cpus),
    concurrency: 4,
    queueLimit: 64,
    ctxSize: 0,
    batchSize: 2048,
    gpuLayers: -1,
    cacheSlots: 8,
    cacheRamMiB: 4096,
    contextSlots: 128,
    flashAttn: 'auto',
    hugePages: 'auto',
    backendSampling: 'auto',
    memoryBudget: 0,
    keepAliveMs: DEFAULT_KEEP_ALIVE_MS,
  };
}
