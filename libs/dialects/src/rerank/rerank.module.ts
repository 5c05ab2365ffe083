import { Module } from '@nestjs/common';
import { RerankController } from './rerank.controller';

/** The rerank routes (documents and texts shapes) over a cross-encoder. */
@Module({ controllers: [RerankController] })
export class RerankModule {}
