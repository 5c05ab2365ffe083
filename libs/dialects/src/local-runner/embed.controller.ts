import { Body, Controller, HttpCode, Inject, Post } from '@nestjs/common';
import { InvalidRequestError } from '../../../engine/src/core/errors';
import { ClientSignal } from '../../../http/src/request-scope.decorator';
import { EmbeddingService, EmbedResult } from '../../../engine/src/embeddings/embedding.service';
import { embeddingInputs } from '../shared/embedding-input';
import { EmbedRequestDto, LegacyEmbeddingRequestDto } from './protocol/local-runner.dto';
import { ns } from './rendering/runner-renderer';

/**
 * The local runner's embedding routes: /api/embed (inputs in, embeddings out; cut to fit unless
 * truncate is false) and the older /api/embeddings (one prompt, one embedding). No input loads
 * the encoder and answers no vectors, as the local runner's preload does; keep_alive works as
 * on /api/chat.
 */
@Controller('api')
export class EmbedController {
  constructor(@Inject(EmbeddingService) private readonly embeddings: EmbeddingService) {}

  @Post('embed')
  @HttpCode(200)
  async embed(@Body() dto: EmbedRequestDto, @ClientSignal() signal: AbortSignal): Promise<Record<string, unknown>> {
    const started = performance.now();
    const inputs = embeddingInputs(dto.input, 'input');
    if (!inputs) {
      const { model, loaded, loadMs } = await this.embeddings.load(dto.model ?? '', dto.keep_alive);
      return { model, embeddings: [], total_duration: ns(performance.now() - started), load_duration: loaded ? ns(loadMs) : 0, prompt_eval_count: 0 };
    }
    const r = await this.embeddings.embed({ model: dto.model ?? '', inputs, truncate: dto.truncate ?? true, dimensions: dto.dimensions, signal, runner: { keepAlive: dto.keep_alive } });
    return {
      model: r.model,
      embeddings: r.vectors.map((v) => Array.from(v)),
      total_duration: ns(performance.now() - started),
      load_duration: loadNs(r),
      prompt_eval_count: r.promptTokens,
    };
  }

  @Post('embeddings')
  @HttpCode(200)
  async legacy(@Body() dto: LegacyEmbeddingRequestDto, @ClientSignal() signal: AbortSignal): Promise<Record<string, unknown>> {
    // One prompt, one vector: a list would lose all but its first.
    if (Array.isArray(dto.prompt)) throw new InvalidRequestError('prompt must be a string (/api/embed takes a list as input)');
    const inputs = embeddingInputs(dto.prompt, 'prompt');
    if (!inputs) {
      await this.embeddings.load(dto.model ?? '', dto.keep_alive);
      return { embedding: [] };
    }
    const r = await this.embeddings.embed({ model: dto.model ?? '', inputs, truncate: true, signal, runner: { keepAlive: dto.keep_alive } });
    return { embedding: Array.from(r.vectors[0]) };
  }
}

function loadNs(r: EmbedResult): number {
  return r.loaded ? ns(r.encoder.loadMs) : 0;
}
