import { Body, Controller, Get, Header, HttpCode, Inject, Post, Req, Res } from '@nestjs/common';
import { FastifyReply, FastifyRequest } from 'fastify';
import { ServerConfig, SERVER_CONFIG } from '../../../apps/server/src/config/server-config';
import { ClientSignal } from '../../http/src/request-scope.decorator';
import { CommandRunner, ExecResult } from './exec/command-runner';
import { checkExecAllowed, execRequest } from './exec/exec-request';
import { StudioPage } from './page/studio-page';

/**
 * The studio (registered only under -studio). The auth layer has admitted each request as
 * any route's, with the studio's own rules (libs/auth origin.ts localSurfaceRefusal: the peer
 * and Host on this machine else 421, a foreign Origin 403) and the key where the server has one.
 */
@Controller('studio')
export class StudioController {
  constructor(
    @Inject(SERVER_CONFIG) private readonly config: ServerConfig,
    @Inject(StudioPage) private readonly page: StudioPage,
    @Inject(CommandRunner) private readonly runner: CommandRunner,
  ) {}

  @Get()
  async show(@Res() reply: FastifyReply): Promise<void> {
    await reply.headers(this.page.headers).send(this.page.html);
  }

  /** What the page adapts to: whether the terminal panel is offered. */
  @Get('config')
  @Header('cache-control', 'no-store')
  settings(): { exec: boolean } {
    return { exec: this.config.features.studioExec };
  }

  /** Runs a command (-studio-exec only); a client that goes away kills it. */
  @Post('exec')
  @HttpCode(200)
  @Header('cache-control', 'no-store')
  exec(@Body() body: unknown, @Req() req: FastifyRequest, @ClientSignal() signal: AbortSignal): Promise<ExecResult> {
    checkExecAllowed(this.config.features.studioExec, req.headers['content-type']);
    return this.runner.run(execRequest(body, process.cwd()), signal);
  }
}
