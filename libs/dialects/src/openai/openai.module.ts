import { Module } from '@nestjs/common';
import { ModelsController } from './models.controller';
import { OpenAIController } from './openai.controller';

@Module({ controllers: [OpenAIController, ModelsController] })
export class OpenAIModule {}
