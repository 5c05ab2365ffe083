import { Body, Controller, HttpCode, Inject, Post, Res } from '@nestjs/common';
import { FastifyReply } from 'fastify';
import { EngineService } from '../../../engine/src/engine.service';
import { RequestScope } from '../../../engine/src/core/generation-request';
import { ClientSignal, ScopeOfRequest } from '../../../http/src/request-scope.decorator';
import { StreamWriter } from '../../../http/src/sse';
import { setMediaHeader } from '../shared/media-header';
import { MESSAGES_DEFAULT_MAX_TOKENS, messagesPromptToCore, messagesRequestToCore } from './mapping/messages-request.mapper';
import { MessagesRequestDto } from './protocol/messages.dto';
import { MessagesRenderer } from './rendering/messages-renderer';

/**
 * The messages dialect: DTO → core request → engine → renderer. The x-api-key
 * and anthropic-version headers its SDK sends are accepted and not read here
 * (authentication, when configured, reads x-api-key globally).
 */
@Controller('v1/messages')
export class MessagesController {
  constructor(@Inject(EngineService) private readonly engine: EngineService) {}

  @Post()
  @HttpCode(200)
  async create(@Body() dto: MessagesRequestDto, @ScopeOfRequest() scope: RequestScope, @Res() reply: FastifyReply): Promise<void> {
    const req = messagesRequestToCore(dto, scope);
    const handle = await this.engine.generate(req);
    setMediaHeader(reply, handle.media);
    const r = new MessagesRenderer(handle.modelName, handle.promptTokens, req.stop, handle.cachedPromptTokens);
    if (dto.stream) await r.stream(handle.events, new StreamWriter(reply, 'text/event-stream'));
    else await reply.send(await r.complete(handle.events));
  }

  @Post('count_tokens')
  @HttpCode(200)
  async countTokens(@Body() dto: MessagesRequestDto, @ClientSignal() signal: AbortSignal, @Res({ passthrough: true }) reply: FastifyReply): Promise<{ input_tokens: number; svc_model: string }> {
    // Thinned as the same body's generation would be (its max_tokens, or the dialect's default).
    const { model, tokens, media } = await this.engine.countTokens(dto.model ?? '', messagesPromptToCore(dto), { maxTokens: dto.max_tokens ?? MESSAGES_DEFAULT_MAX_TOKENS, signal });
    setMediaHeader(reply, media);
    return { input_tokens: tokens, svc_model: model.name };
  }
}
