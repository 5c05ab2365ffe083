import { Controller, Get, Header } from '@nestjs/common';
import { VERSION } from '../../../../apps/server/src/config/server-config';

@Controller()
export class VersionController {
  @Get('api/version')
  version(): { version: string } {
    return { version: VERSION };
  }

  /**
   * The local runner's heartbeat: its command-line client sends HEAD / before every command
   * (list, ps, run, pull…) and stops on anything but a 200, so a 404 here kept it from svc.
   * (Fastify answers HEAD from the GET route.)
   */
  @Get()
  @Header('content-type', 'text/plain; charset=utf-8')
  root(): string {
    return 'svc is running';
  }
}
