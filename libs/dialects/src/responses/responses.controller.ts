import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Post, Query, Req, Res } from '@nestjs/common';
import { FastifyReply, FastifyRequest } from 'fastify';
import { ClientSignal } from '../../../http/src/request-scope.decorator';
import { requestIdentity } from '../../../http/src/identity';
import { StreamWriter } from '../../../http/src/sse';
import { setMediaHeader } from '../shared/media-header';
import { ResponsesRequestDto } from './protocol/responses.dto';
import { ResponsesRenderer } from './rendering/responses-renderer';
import { PageQuery } from './rendering/input-items';
import { ResponsesService } from './responses.service';

/** The Responses dialect: DTO → turn (core request on a kept context) → renderer → stored response. */
@Controller('v1/responses')
export class ResponsesController {
  constructor(@Inject(ResponsesService) private readonly responses: ResponsesService) {}

  @Post()
  @HttpCode(200)
  async create(@Body() dto: ResponsesRequestDto, @Req() req: FastifyRequest, @ClientSignal() signal: AbortSignal, @Res() reply: FastifyReply): Promise<void> {
    const turn = await this.responses.begin(dto, requestIdentity(req), signal);
    setMediaHeader(reply, turn.media);
    const r = new ResponsesRenderer(turn.base, turn.finish);
    try {
      if (dto.stream) await r.stream(turn.events, new StreamWriter(reply, 'text/event-stream'));
      else await reply.send(await r.complete(turn.events));
    } finally {
      await turn.abandon();
    }
  }

  @Get(':id')
  get(@Param('id') id: string, @Req() req: FastifyRequest): unknown {
    return this.responses.get(id, requestIdentity(req));
  }

  @Get(':id/input_items')
  inputItems(@Param('id') id: string, @Query() q: PageQuery, @Req() req: FastifyRequest): unknown {
    return this.responses.inputItems(id, requestIdentity(req), q);
  }

  @Delete(':id')
  async remove(@Param('id') id: string, @Req() req: FastifyRequest): Promise<unknown> {
    return this.responses.remove(id, requestIdentity(req));
  }
}
