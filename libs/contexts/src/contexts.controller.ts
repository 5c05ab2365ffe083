import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Post, Req, Res } from '@nestjs/common';
import { FastifyReply, FastifyRequest } from 'fastify';
import { requestIdentity } from '../../http/src/identity';
import { ContextsService } from './contexts.service';
import { InvalidRequestError } from '../../engine/src/core/errors';
import { jsonObject } from '../../http/src/json-body';
import { QueryParam } from '../../http/src/query-param.decorator';
import { ClientSignal } from '../../http/src/request-scope.decorator';

/** KV-cache contexts (spec "Contexts"): every route on an existing context takes ?model=. */
@Controller('v1/contexts')
export class ContextsController {
  constructor(@Inject(ContextsService) private readonly contexts: ContextsService) {}

  @Post()
  @HttpCode(201)
  async create(@Body() body: { model?: unknown; prompt?: unknown; messages?: unknown } | undefined, @Req() req: FastifyRequest, @ClientSignal() signal: AbortSignal): Promise<unknown> {
    const b = jsonObject(body);
    if (b.model != null && typeof b.model !== 'string') throw new InvalidRequestError('cannot parse request: model must be a string');
    return (await this.contexts.create((b.model as string | null | undefined) ?? '', requestIdentity(req), b, signal)).toJSON();
  }

  @Get()
  async list(@QueryParam('model') model: string | undefined, @Req() req: FastifyRequest): Promise<unknown> {
    return { object: 'list', data: (await this.contexts.list(model ?? '', requestIdentity(req))).map((c) => c.toJSON()) };
  }

  @Post('restore')
  @HttpCode(201)
  async restore(@QueryParam('model') model: string | undefined, @Body() body: Buffer, @Req() req: FastifyRequest): Promise<unknown> {
    return (await this.contexts.restore(model ?? '', requestIdentity(req), body)).toJSON();
  }

  @Post('import')
  @HttpCode(201)
  async import(@QueryParam('model') model: string | undefined, @Body() body: Buffer, @Req() req: FastifyRequest): Promise<unknown> {
    const { ctx, from } = await this.contexts.import(model ?? '', requestIdentity(req), body);
    return { ...ctx.toJSON(), from };
  }

  @Get(':id')
  async one(@Param('id') id: string, @QueryParam('model') model: string | undefined, @Req() req: FastifyRequest): Promise<unknown> {
    return (await this.contexts.find(model ?? '', requestIdentity(req), id)).ctx.toJSON();
  }

  @Post(':id/fork')
  @HttpCode(201)
  async fork(@Param('id') id: string, @QueryParam('model') model: string | undefined, @QueryParam('n') n: string | undefined, @Req() req: FastifyRequest): Promise<unknown> {
    const { children, ms } = await this.contexts.fork(model ?? '', requestIdentity(req), id, n);
    return { object: 'list', data: children.map((c) => c.toJSON()), fork_ms: Math.round(ms * 1000) / 1000 };
  }

  @Post(':id/truncate')
  @HttpCode(200)
  async truncate(@Param('id') id: string, @QueryParam('model') model: string | undefined, @Body() body: { tokens?: unknown; messages?: unknown }, @Req() req: FastifyRequest): Promise<unknown> {
    return (await this.contexts.truncate(model ?? '', requestIdentity(req), id, jsonObject(body))).toJSON();
  }

  @Get(':id/snapshot')
  async snapshot(@Param('id') id: string, @QueryParam('model') model: string | undefined, @QueryParam('precision') precision: string | undefined, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const file = await this.contexts.save('snapshot', model ?? '', requestIdentity(req), id, precision);
    await reply.type('application/octet-stream').header('content-disposition', `attachment; filename="${id}.svcctx"`).send(file);
  }

  @Get(':id/export')
  async export(@Param('id') id: string, @QueryParam('model') model: string | undefined, @QueryParam('precision') precision: string | undefined, @Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const file = await this.contexts.save('export', model ?? '', requestIdentity(req), id, precision);
    await reply.type('application/octet-stream').header('content-disposition', `attachment; filename="${id}.svcx"`).send(file);
  }

  @Delete(':id')
  @HttpCode(204)
  async remove(@Param('id') id: string, @QueryParam('model') model: string | undefined, @Req() req: FastifyRequest): Promise<void> {
    await this.contexts.remove(model ?? '', requestIdentity(req), id);
  }
}

