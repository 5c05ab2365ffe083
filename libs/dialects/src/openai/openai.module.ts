import { Module } from '@nestjs/common';
import { EmbeddingsController } from './embeddings.controller';
import { ModelsController } from './models.controller';
import { OpenAIController } from './openai.controller';
import { OpenAIService } from './openai.service';

@Module({ controllers: [OpenAIController, EmbeddingsController, ModelsController], providers: [OpenAIService], exports: [OpenAIService] })
export class OpenAIModule {}
