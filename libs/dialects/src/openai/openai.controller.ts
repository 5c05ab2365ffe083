import { Body, Controller, HttpCode, Inject, Post, Res } from '@nestjs/common';
import { FastifyReply } from 'fastify';
import { RequestScope } from '../../../engine/src/core/generation-request';
import { ScopeOfRequest } from '../../../http/src/request-scope.decorator';
import { StreamWriter } from '../../../http/src/sse';
import { setMediaHeader } from '../shared/media-header';
import { OpenAIService } from './openai.service';
import { ChatCompletionRequestDto } from './protocol/chat-completion.dto';
import { CompletionRequestDto } from './protocol/completion.dto';

/** The chat-completions dialect: DTO → core request → engine → renderer (OpenAIService). */
@Controller('v1')
export class OpenAIController {
  constructor(@Inject(OpenAIService) private readonly openai: OpenAIService) {}

  @Post('chat/completions')
  @HttpCode(200)
  async chat(@Body() dto: ChatCompletionRequestDto, @ScopeOfRequest() scope: RequestScope, @Res() reply: FastifyReply): Promise<void> {
    const { events, renderer, media } = await this.openai.startChat(dto, scope);
    setMediaHeader(reply, media);
    if (dto.stream) await renderer.stream(events, new StreamWriter(reply, 'text/event-stream'));
    else await reply.send(await renderer.complete(events));
  }

  @Post('completions')
  @HttpCode(200)
  async completions(@Body() dto: CompletionRequestDto, @ScopeOfRequest() scope: RequestScope, @Res() reply: FastifyReply): Promise<void> {
    const { events, renderer } = await this.openai.startCompletion(dto, scope);
    if (dto.stream) await renderer.stream(events, new StreamWriter(reply, 'text/event-stream'));
    else await reply.send(await renderer.complete(events));
  }
}
