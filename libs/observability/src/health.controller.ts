import { Controller, Get, Inject, Optional, Res } from '@nestjs/common';
import { HealthCheckError, HealthCheckService, HealthIndicatorResult } from '@nestjs/terminus';
import { FastifyReply } from 'fastify';
import { randomUUID } from 'node:crypto';
import { InferenceBackend } from '../../engine/src/backend/inference-backend';
import { ModelManager } from '../../engine/src/models/model-manager';
import { LoadedModel } from '../../engine/src/models/loaded-model';
import { VERSION } from '../../../apps/server/src/config/server-config';
import { BootState } from './boot-state';
import { Transcriber } from '../../speech/src/transcriber';

/** Identifies this process (the health object's `instance`). */
const INSTANCE = randomUUID();

/**
 * GET /healthz (never needs a key): 200 once the default model is loaded (or
 * the store is empty: the no-model state is healthy), 503 while loading or
 * after a failed load. Terminus runs the checks; the body is the spec's shape.
 */
@Controller()
export class HealthController {
  constructor(
    @Inject(HealthCheckService) private readonly health: HealthCheckService,
    @Inject(ModelManager) private readonly models: ModelManager,
    @Inject(InferenceBackend) private readonly backend: InferenceBackend,
    @Inject(BootState) private readonly boot: BootState,
    @Optional() @Inject(Transcriber) private readonly transcriber?: Transcriber,
  ) {}

  @Get('healthz')
  async healthz(@Res() reply: FastifyReply): Promise<void> {
    let ok = true;
    try {
      await this.health.check([() => this.engineCheck()]);
    } catch {
      ok = false;
    }
    const lm = this.boot.model;
    const body: Record<string, unknown> = {
      status: ok ? 'ok' : this.boot.state,
      model: lm ? this.models.listedName(lm) : '',
      id: lm ? `sha256:${lm.contentHash}` : '',
      instance: INSTANCE,
      version: VERSION,
      backend: this.backend.name,
      // A chat request may carry an image: the default model has a vision projector loaded.
      vision: lm instanceof LoadedModel && lm.projector !== undefined,
    };
    // The speech model (-whisper), by its file name: it is loaded before the server listens.
    if (this.transcriber?.enabled) body.transcription = this.transcriber.modelName;
    if (this.boot.state === 'no-model') body.warning = this.boot.noModel ?? 'this server has no model. Pull one: POST /api/pull';
    if (this.boot.error) body.warning = this.boot.error;
    await reply.status(ok ? 200 : 503).send(body);
  }

  private async engineCheck(): Promise<HealthIndicatorResult> {
    const state = this.boot.state;
    const result: HealthIndicatorResult = { engine: { status: state === 'ready' || state === 'no-model' ? 'up' : 'down', state } };
    if (result.engine.status === 'down') throw new HealthCheckError(`engine ${state}`, result);
    return result;
  }
}
