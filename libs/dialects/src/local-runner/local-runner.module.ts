import { Module } from '@nestjs/common';
import { VersionController } from './version.controller';

/** The local-runner (Ollama) dialect under /api. */
@Module({ controllers: [VersionController] })
export class LocalRunnerModule {}
