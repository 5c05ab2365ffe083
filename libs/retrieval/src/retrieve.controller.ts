import { Body, Controller, HttpCode, Inject, Post, Req } from '@nestjs/common';
import { FastifyRequest } from 'fastify';
import { callerOf } from '../../auth/src/decorators';
import { InvalidRequestError } from '../../engine/src/core/errors';
import { ClientSignal } from '../../http/src/request-scope.decorator';
import { RetrieveRequestDto } from './protocol/retrieve.dto';
import { RetrievalService } from './retrieval.service';

/** Results per retrieve when top_k is absent. */
const DEFAULT_TOP_K = 5;

/** POST /v1/retrieve: the index's chunks nearest the query, as the caller's labels allow. */
@Controller('v1')
export class RetrieveController {
  constructor(@Inject(RetrievalService) private readonly retrieval: RetrievalService) {}

  @Post('retrieve')
  @HttpCode(200)
  async retrieve(@Body() dto: RetrieveRequestDto, @Req() req: FastifyRequest, @ClientSignal() signal: AbortSignal): Promise<unknown> {
    if (dto.query === undefined || dto.query === null || dto.query.trim() === '') throw new InvalidRequestError('query is required');
    const r = await this.retrieval.retrieve({ query: dto.query, topK: dto.top_k ?? DEFAULT_TOP_K, rerank: dto.rerank ?? false, caller: callerOf(req), signal });
    return {
      object: 'list',
      model: r.model,
      index_model: r.indexModel,
      data: r.chunks.map((c) => ({ source: c.source, start: c.chunk.start, end: c.chunk.end, text: c.chunk.text, labels: c.labels, score: c.score, rerank_score: c.rerankScore })),
    };
  }
}
