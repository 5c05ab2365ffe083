import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { BootState } from './boot-state';
import { HealthController } from './health.controller';
import { MetricsController } from './metrics.controller';
import { MetricsService } from './metrics.service';

@Module({
  imports: [TerminusModule.forRoot({ logger: false })],
  controllers: [HealthController, MetricsController],
  providers: [MetricsService, BootState],
  exports: [MetricsService, BootState],
})
export class ObservabilityModule {}
