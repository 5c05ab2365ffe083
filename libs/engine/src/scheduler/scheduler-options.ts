/** How a Scheduler batches, queues, retains prompts and meets JS between decode steps. */
export interface SchedulerOptions {
  /** Sequences generating at once. */
  concurrency: number;
  /** Requests waiting beyond `concurrency`; past it, submit throws QueueFullError. */
  queueLimit: number;
  /** Largest batch handed to one decode. */
  nBatch: number;
  /** Positions one sequence may hold (prompt + output). */
  nCtxSeq: number;
  /** Retained prompts kept at most. */
  cacheSlots: number;
  /** Positions the retained prompts may hold together in the KV cache. */
  cachePositions: number;
  /** Bytes retained prompts may take in host memory once moved out of the KV cache (0: none). */
  cacheHostBytes?: number;
  /** The KV cache is in device memory (see PrefixCacheLimits.kvOnDevice). */
  kvOnDevice?: boolean;
  /**
   * Start a decoding batch's next chain before JS handles the last one's tokens.
   * Off when decode threads take every CPU: JS would then preempt them mid-step.
   */
  pipeline?: boolean;
  /**
   * Decode steps one native call may chain for a batch of decoding sequences
   * (1 = off; default 64) and the time after which it starts no further one
   * (default 24 ms): the JS round trip per chain leaves the GPU idle, while
   * streams should not come in long bursts (24 ms is below what a reader sees).
   * New requests, cancels and context operations end a chain at once.
   */
  chainSteps?: number;
  chainMs?: number;
  /**
   * Streaming chains (off when undefined or negative): a batch of decoding
   * sequences decodes on natively (up to 1024 steps, 1 s) and hands its tokens
   * to JS every `streamMs` as it goes, so the engine never waits on JS between
   * chains. The chain ends as soon as JS has something to change. Takes
   * precedence over chainSteps/chainMs/pipeline for such batches.
   */
  streamMs?: number;
}
