import { DynamicModule, Inject, Logger, Module, OnModuleInit } from '@nestjs/common';
import { ServerConfig, SERVER_CONFIG } from '../../../apps/server/src/config/server-config';
import { AuthService } from '../../auth/src/auth.service';
import { CommandRunner } from './exec/command-runner';
import { StudioPage } from './page/studio-page';
import { StudioController } from './studio.controller';

/**
 * The local studio page (GET /studio) and its command route (POST /studio/exec, which runs
 * commands only under -studio-exec). Without -studio no route is registered: /studio is an
 * unknown route (404) like any other, after the same auth checks.
 */
@Module({})
export class StudioModule implements OnModuleInit {
  constructor(
    @Inject(SERVER_CONFIG) private readonly config: ServerConfig,
    @Inject(AuthService) private readonly auth: AuthService,
  ) {}

  static forRoot(config: ServerConfig): DynamicModule {
    const on = config.features.studio;
    return { module: StudioModule, controllers: on ? [StudioController] : [], providers: on ? [StudioPage, CommandRunner] : [] };
  }

  /** Said once at boot: the two ways -studio-exec may not be what its user thinks. */
  onModuleInit(): void {
    const { studio, studioExec } = this.config.features;
    if (!studioExec) return;
    const log = new Logger('studio');
    if (!studio) log.warn('-studio-exec without -studio: the studio is not served, so no command can run');
    else if (!this.auth.required) log.warn('-studio-exec on a server without credentials: any program on this machine can run commands as this user through POST /studio/exec (add -api-key)');
  }
}
