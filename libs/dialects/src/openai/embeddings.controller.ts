import { Body, Controller, HttpCode, Inject, Post } from '@nestjs/common';
import { ClientSignal } from '../../../http/src/request-scope.decorator';
import { InvalidRequestError } from '../../../engine/src/core/errors';
import { EmbeddingService } from '../../../engine/src/embeddings/embedding.service';
import { embeddingInputs } from '../shared/embedding-input';
import { EmbeddingRequestDto } from './protocol/embedding.dto';
import { EncodingFormat, renderEmbeddings } from './rendering/embedding-renderer';

/** POST /v1/embeddings: DTO → embedding service → OpenAI's list. */
@Controller('v1')
export class EmbeddingsController {
  constructor(@Inject(EmbeddingService) private readonly embeddings: EmbeddingService) {}

  @Post('embeddings')
  @HttpCode(200)
  async create(@Body() dto: EmbeddingRequestDto, @ClientSignal() signal: AbortSignal): Promise<Record<string, unknown>> {
    const format = dto.encoding_format ?? 'float';
    if (format !== 'float' && format !== 'base64') throw new InvalidRequestError(`encoding_format ${JSON.stringify(format)} is not one of float, base64`);
    const inputs = embeddingInputs(dto.input, 'input');
    if (!inputs) throw new InvalidRequestError(dto.input === undefined || dto.input === null ? 'input is required' : 'input is an empty array: there is nothing to embed');
    // OpenAI refuses an input over the model's length rather than cutting it.
    const r = await this.embeddings.embed({ model: dto.model ?? '', inputs, truncate: false, dimensions: dto.dimensions, signal });
    return renderEmbeddings(r, format as EncodingFormat);
  }
}
