/** Plain counters the observability module reads; the engine knows nothing of Prometheus. */
export interface StepInfo {
  tokens: number;
  sequences: number;
  prefillTokens: number;
  sampled: number;
  decodeUs: number;
}

export interface FinishInfo {
  /** Queue wait + prefill until the first token, ms. */
  ttftMs: number;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
}

export interface StatsObserver {
  onStep?(info: StepInfo): void;
  onFinish?(info: FinishInfo): void;
}

export class SchedulerStats {
  requests = 0;
  completed = 0;
  cancelled = 0;
  rejected = 0;
  steps = 0;
  /** Steps whose batch held more than one sequence. */
  sharedSteps = 0;
  maxSequencesInStep = 0;
  batchTokens = 0;
  promptTokensDecoded = 0;
  /** Prompt tokens of finished requests (cached ones included). */
  promptTokens = 0;
  cachedPromptTokens = 0;
  generatedTokens = 0;
  decodeUs = 0;
  /** Microseconds the engine spent sampling (llama.cpp's sampler chains, logprobs). */
  sampleUs = 0;
  /** Chains started before JS handled the previous one's tokens. */
  pipelinedChains = 0;
  /**
   * Microseconds the engine sat idle before a step of decoding sequences alone:
   * what the round trips through JS cost running streams (a GPU waits that long).
   */
  decodeIdleUs = 0;
  /** Steps handed to JS while their chain went on (streaming chains). */
  streamedSteps = 0;
  private readonly observers: StatsObserver[] = [];

  observe(o: StatsObserver): void {
    this.observers.push(o);
  }

  recordFinish(info: FinishInfo): void {
    this.completed++;
    this.promptTokens += info.promptTokens;
    for (const o of this.observers) o.onFinish?.(info);
  }

  recordStep(tokens: number, sequences: number, prefillTokens: number, sampled: number, decodeUs: number): void {
    this.steps++;
    this.batchTokens += tokens;
    this.promptTokensDecoded += prefillTokens;
    this.decodeUs += decodeUs;
    if (sequences > 1) this.sharedSteps++;
    if (sequences > this.maxSequencesInStep) this.maxSequencesInStep = sequences;
    for (const o of this.observers) o.onStep?.({ tokens, sequences, prefillTokens, sampled, decodeUs });
  }
}
