import { Body, Controller, HttpCode, Inject, Post } from '@nestjs/common';
import { ClientSignal } from '../../http/src/request-scope.decorator';
import { RouteRequestDto } from './protocol/route.dto';
import { routeInput } from './route-input';
import { RouteService } from './route.service';

/** POST /v1/route: a message's category and the installed chat models ranked for it. */
@Controller('v1')
export class RouteController {
  constructor(@Inject(RouteService) private readonly routes: RouteService) {}

  @Post('route')
  @HttpCode(200)
  async route(@Body() dto: RouteRequestDto, @ClientSignal() signal: AbortSignal): Promise<unknown> {
    return this.routes.route(await routeInput(dto, signal), dto.prefer ?? 'best', signal);
  }
}
