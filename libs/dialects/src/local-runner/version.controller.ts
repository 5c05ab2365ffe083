import { Controller, Get } from '@nestjs/common';
import { VERSION } from '../../../../apps/server/src/config/server-config';

@Controller('api')
export class VersionController {
  @Get('version')
  version(): { version: string } {
    return { version: VERSION };
  }
}
