import { Inject, Injectable } from '@nestjs/common';
import { InvalidRequestError } from '../../../engine/src/core/errors';
import { GenerationEvent } from '../../../engine/src/core/generation-events';
import { RequestScope } from '../../../engine/src/core/generation-request';
import { EmbeddingService } from '../../../engine/src/embeddings/embedding.service';
import { EngineService } from '../../../engine/src/engine.service';
import { MediaTally } from '../../../engine/src/media/media-plan';
import { ModelCatalog } from '../../../store/src/catalog';
import { embeddingInputs } from '../shared/embedding-input';
import { chatRequestToCore, completionRequestToCore } from './mapping/chat-request.mapper';
import { ChatCompletionRequestDto } from './protocol/chat-completion.dto';
import { CompletionRequestDto } from './protocol/completion.dto';
import { EmbeddingRequestDto } from './protocol/embedding.dto';
import { ChatRenderer } from './rendering/chat-renderer';
import { CompletionRenderer } from './rendering/completion-renderer';
import { EncodingFormat, renderEmbeddings } from './rendering/embedding-renderer';
import { modelEntry } from './rendering/model-entry';

/** A generation under way and the renderer of its answer: whole (complete) or streamed (stream). */
export interface StartedGeneration<R> {
  events: AsyncIterable<GenerationEvent>;
  renderer: R;
  /** Present when the prompt's pictures were thinned. */
  media?: MediaTally;
}

/**
 * The /v1 routes' work from a validated body to the answer's JSON, in one place for their
 * controllers and for the MCP tools (libs/mcp), which answer with the same JSON.
 */
@Injectable()
export class OpenAIService {
  constructor(
    @Inject(EngineService) private readonly engine: EngineService,
    @Inject(EmbeddingService) private readonly embedder: EmbeddingService,
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
  ) {}

  async startChat(dto: ChatCompletionRequestDto, scope: RequestScope): Promise<StartedGeneration<ChatRenderer>> {
    const handle = await this.engine.generate(chatRequestToCore(dto, scope));
    return { events: handle.events, renderer: new ChatRenderer(handle.modelName, handle.media), media: handle.media };
  }

  async startCompletion(dto: CompletionRequestDto, scope: RequestScope): Promise<StartedGeneration<CompletionRenderer>> {
    const handle = await this.engine.generate(completionRequestToCore(dto, scope));
    // echo: the answer's text starts with the prompt (one string: the mapper refuses more).
    return { events: handle.events, renderer: new CompletionRenderer(handle.modelName, dto.echo ? [dto.prompt].flat()[0] : '') };
  }

  async embeddings(dto: EmbeddingRequestDto, signal?: AbortSignal): Promise<Record<string, unknown>> {
    const format = dto.encoding_format ?? 'float';
    if (format !== 'float' && format !== 'base64') throw new InvalidRequestError(`encoding_format ${JSON.stringify(format)} is not one of float, base64`);
    const inputs = embeddingInputs(dto.input, 'input');
    if (!inputs) throw new InvalidRequestError(dto.input === undefined || dto.input === null ? 'input is required' : 'input is an empty array: there is nothing to embed');
    // OpenAI refuses an input over the model's length rather than cutting it.
    const r = await this.embedder.embed({ model: dto.model ?? '', inputs, truncate: false, dimensions: dto.dimensions, signal });
    return renderEmbeddings(r, format as EncodingFormat);
  }

  /** GET /v1/models: every model the server could load (the same set as /api/tags). */
  models(): { object: 'list'; data: Array<Record<string, unknown>> } {
    return { object: 'list', data: this.catalog.list().map(modelEntry) };
  }
}
