import { Body, Controller, HttpCode, Inject, Post } from '@nestjs/common';
import { ClientSignal } from '../../../http/src/request-scope.decorator';
import { RerankService } from '../../../engine/src/embeddings/rerank.service';
import { RerankRequestDto } from './protocol/rerank.dto';
import { renderRerank } from './rendering/rerank-renderer';
import { readRerank } from './rerank-request';

/** POST /rerank, /v1/rerank and /rerank/v1/rerank: one route in the shape its request came in. */
@Controller()
export class RerankController {
  constructor(@Inject(RerankService) private readonly reranker: RerankService) {}

  @Post(['rerank', 'v1/rerank', 'rerank/v1/rerank'])
  @HttpCode(200)
  async rerank(@Body() dto: RerankRequestDto, @ClientSignal() signal: AbortSignal): Promise<unknown> {
    const ask = readRerank(dto);
    const r = await this.reranker.rerank({ model: dto.model ?? '', query: ask.query, documents: ask.texts, signal });
    return renderRerank(ask, r, { rawScores: dto.raw_scores ?? false, returnText: dto.return_text ?? false, returnDocuments: dto.return_documents ?? true });
  }
}
