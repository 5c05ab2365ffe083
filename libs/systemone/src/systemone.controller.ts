import { Body, Controller, HttpCode, Inject, Post, Req, Res } from '@nestjs/common';
import { FastifyReply, FastifyRequest } from 'fastify';
import { nestedKeyOrders } from '../../http/src/json-key-order';
import { RequestScope } from '../../engine/src/core/generation-request';
import { ScopeOfRequest } from '../../http/src/request-scope.decorator';
import { DecisionRequestDto } from './protocol/decision.dto';
import { decisionJson, SystemOneService } from './systemone.service';

/** POST /v1/systemone: named questions about a state, answered with probabilities. */
@Controller('v1')
export class SystemOneController {
  constructor(@Inject(SystemOneService) private readonly systemone: SystemOneService) {}

  @Post('systemone')
  @HttpCode(200)
  async decide(@Body() dto: DecisionRequestDto, @ScopeOfRequest() scope: RequestScope, @Req() req: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply): Promise<unknown> {
    // "Answered in the order sent", options lettered in the order sent: keys like "2" and "1" keep the body's order, not JavaScript's.
    const orders = nestedKeyOrders(req, 'questions', 'criteria');
    const d = await this.systemone.decide(dto, scope, (path) => (path.length === 1 ? orders?.keys : orders?.inner.get(path[1])));
    reply.header('X-Svc-Evaluated-Tokens', String(d.evaluatedTokens));
    reply.header('content-type', 'application/json; charset=utf-8');
    return decisionJson(d);
  }
}
