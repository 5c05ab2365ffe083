import { Module } from '@nestjs/common';
import { SystemOneController } from './systemone.controller';
import { SystemOneService } from './systemone.service';

/** Probability-based decisions (POST /v1/systemone) over the engine's next-token scorer. */
@Module({ controllers: [SystemOneController], providers: [SystemOneService] })
export class SystemOneModule {}
