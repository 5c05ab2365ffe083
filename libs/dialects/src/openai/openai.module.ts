import { Module } from '@nestjs/common';
import { EmbeddingsController } from './embeddings.controller';
import { ModelsController } from './models.controller';
import { OpenAIController } from './openai.controller';

@Module({ controllers: [OpenAIController, EmbeddingsController, ModelsController] })
export class OpenAIModule {}
