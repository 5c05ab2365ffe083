import { Body, Controller, HttpCode, Inject, Post, Res } from '@nestjs/common';
import { FastifyReply } from 'fastify';
import { EngineService } from '../../../engine/src/engine.service';
import { RequestScope } from '../../../engine/src/core/generation-request';
import { ScopeOfRequest } from '../../../http/src/request-scope.decorator';
import { StreamWriter } from '../../../http/src/sse';
import { chatRequestToCore, completionRequestToCore } from './mapping/chat-request.mapper';
import { ChatCompletionRequestDto } from './protocol/chat-completion.dto';
import { CompletionRequestDto } from './protocol/completion.dto';
import { ChatRenderer } from './rendering/chat-renderer';
import { CompletionRenderer } from './rendering/completion-renderer';

/** The chat-completions dialect: DTO → core request → engine → renderer. */
@Controller('v1')
export class OpenAIController {
  constructor(@Inject(EngineService) private readonly engine: EngineService) {}

  @Post('chat/completions')
  @HttpCode(200)
  async chat(@Body() dto: ChatCompletionRequestDto, @ScopeOfRequest() scope: RequestScope, @Res() reply: FastifyReply): Promise<void> {
    const handle = await this.engine.generate(chatRequestToCore(dto, scope));
    const r = new ChatRenderer(handle.modelName);
    if (dto.stream) await r.stream(handle.events, new StreamWriter(reply, 'text/event-stream'));
    else await reply.send(await r.complete(handle.events));
  }

  @Post('completions')
  @HttpCode(200)
  async completions(@Body() dto: CompletionRequestDto, @ScopeOfRequest() scope: RequestScope, @Res() reply: FastifyReply): Promise<void> {
    const handle = await this.engine.generate(completionRequestToCore(dto, scope));
    // echo: the answer's text starts with the prompt (one string: the mapper refuses more).
    const r = new CompletionRenderer(handle.modelName, dto.echo ? [dto.prompt].flat()[0] : '');
    if (dto.stream) await r.stream(handle.events, new StreamWriter(reply, 'text/event-stream'));
    else await reply.send(await r.complete(handle.events));
  }
}
