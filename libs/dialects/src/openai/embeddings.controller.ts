import { Body, Controller, HttpCode, Inject, Post } from '@nestjs/common';
import { ClientSignal } from '../../../http/src/request-scope.decorator';
import { OpenAIService } from './openai.service';
import { EmbeddingRequestDto } from './protocol/embedding.dto';

/** POST /v1/embeddings: DTO → embedding service → OpenAI's list (OpenAIService). */
@Controller('v1')
export class EmbeddingsController {
  constructor(@Inject(OpenAIService) private readonly openai: OpenAIService) {}

  @Post('embeddings')
  @HttpCode(200)
  create(@Body() dto: EmbeddingRequestDto, @ClientSignal() signal: AbortSignal): Promise<Record<string, unknown>> {
    return this.openai.embeddings(dto, signal);
  }
}
