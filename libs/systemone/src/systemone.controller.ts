import { Body, Controller, HttpCode, Inject, Post, Res } from '@nestjs/common';
import { FastifyReply } from 'fastify';
import { RequestScope } from '../../engine/src/core/generation-request';
import { ScopeOfRequest } from '../../http/src/request-scope.decorator';
import { DecisionRequestDto } from './protocol/decision.dto';
import { SystemOneService } from './systemone.service';

/** POST /v1/systemone: named questions about a state, answered with probabilities. */
@Controller('v1')
export class SystemOneController {
  constructor(@Inject(SystemOneService) private readonly systemone: SystemOneService) {}

  @Post('systemone')
  @HttpCode(200)
  async decide(@Body() dto: DecisionRequestDto, @ScopeOfRequest() scope: RequestScope, @Res({ passthrough: true }) reply: FastifyReply): Promise<unknown> {
    const d = await this.systemone.decide(dto, scope);
    reply.header('X-Svc-Evaluated-Tokens', String(d.evaluatedTokens));
    return d.body;
  }
}
