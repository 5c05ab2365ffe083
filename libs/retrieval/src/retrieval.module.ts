import { Module } from '@nestjs/common';
import { RetrieveController } from './retrieve.controller';
import { RetrievalService } from './retrieval.service';

/** Document retrieval (POST /v1/retrieve) over the -index folder, embedded with the -embed encoder. */
@Module({ controllers: [RetrieveController], providers: [RetrievalService] })
export class RetrievalModule {}
