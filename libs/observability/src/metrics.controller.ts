import { Controller, Get, Header, Inject } from '@nestjs/common';
import { QueryParam } from '../../http/src/query-param.decorator';
import { NoModelError } from '../../engine/src/core/errors';
import { EncoderPool } from '../../engine/src/embeddings/encoder-pool';
import { ModelManager } from '../../engine/src/models/model-manager';
import { CatalogEntry, isEncoderEntry } from '../../store/src/catalog';
import { MetricsService } from './metrics.service';

@Controller()
export class MetricsController {
  constructor(
    @Inject(MetricsService) private readonly metrics: MetricsService,
    @Inject(ModelManager) private readonly models: ModelManager,
    @Inject(EncoderPool) private readonly encoders: EncoderPool,
  ) {}

  @Get('metrics')
  @Header('content-type', 'text/plain; version=0.0.4; charset=utf-8')
  async scrape(): Promise<string> {
    return this.metrics.registry.metrics();
  }

  /** The default model's numbers (or ?model=), as JSON. */
  @Get('v1/stats')
  async stats(@QueryParam('model') model?: string): Promise<unknown> {
    // An empty name is the default model, as in a request's `model` (spec rule 1).
    const name = model || this.models.catalog.defaultName();
    // The no-model state is a 503, as on every route that needs a model (spec rule 7).
    if (name === undefined) throw new NoModelError();
    // A name nothing lists: the catalog's 404, with the available names.
    const entry = this.models.catalog.resolve(name);
    if (isEncoderEntry(entry)) return this.encoderStats(entry);
    const lm = this.models.resident().find((m) => m.entry.path === entry.path);
    // A listed model not loaded now is no 404 (a poller would read it as gone): its numbers start with its next load.
    if (!lm) return { model: entry.name, loaded: false };
    const s = lm.scheduler.stats;
    return {
      // The name asked for: two names of one file share a load.
      model: entry.name,
      loaded: true,
      backend_load_ms: Math.round(lm.loadMs),
      context_per_request: lm.scheduler.nCtxSeq,
      queued: lm.scheduler.queued,
      active: lm.scheduler.activeCount,
      requests: s.requests,
      completed: s.completed,
      cancelled: s.cancelled,
      rejected: s.rejected,
      steps: s.steps,
      shared_steps: s.sharedSteps,
      max_sequences_in_step: s.maxSequencesInStep,
      batch_tokens: s.batchTokens,
      prompt_tokens: s.promptTokens,
      prompt_tokens_decoded: s.promptTokensDecoded,
      cached_prompt_tokens: s.cachedPromptTokens,
      prompt_cache: lm.scheduler.promptCache,
      contexts: lm.contexts.size,
      pipelined_chains: s.pipelinedChains,
      sampler_reuses: lm.scheduler.samplerReuses,
      generated_tokens: s.generatedTokens,
      decode_ms: Math.round(s.decodeUs / 1000),
      sample_ms: Math.round(s.sampleUs / 1000),
      decode_idle_ms: Math.round(s.decodeIdleUs / 1000),
      streamed_steps: s.streamedSteps,
    };
  }

  /** An encoder's numbers: requests, inputs and tokens embedded, native calls (requests waiting together share one). */
  private async encoderStats(entry: CatalogEntry): Promise<unknown> {
    const enc = (await this.encoders.resident()).find((e) => e.entry.path === entry.path);
    if (!enc) return { model: entry.name, loaded: false };
    const s = enc.stats;
    return {
      model: entry.name,
      loaded: true,
      backend_load_ms: Math.round(enc.loadMs),
      context_per_request: enc.embedder.nCtx,
      pooling: enc.embedder.pooling,
      requests: s.requests,
      inputs: s.inputs,
      prompt_tokens: s.tokens,
      calls: s.calls,
      rejected: s.rejected,
      cancelled: s.cancelled,
      compute_ms: Math.round(s.computeMs),
    };
  }
}
