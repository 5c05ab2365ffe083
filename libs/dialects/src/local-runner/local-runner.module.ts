import { Module } from '@nestjs/common';
import { EmbedController } from './embed.controller';
import { ModelsInfoController } from './models-info.controller';
import { RunnerController } from './runner.controller';
import { StoreController } from './store.controller';
import { VersionController } from './version.controller';

/** The local-runner (Ollama) dialect under /api; StoreController (pull, copy, delete) is the model-store work's. */
@Module({ controllers: [VersionController, RunnerController, EmbedController, ModelsInfoController, StoreController] })
export class LocalRunnerModule {}
