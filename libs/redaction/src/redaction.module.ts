import { Module } from '@nestjs/common';
import { RedactController } from './redact.controller';

/** Personal-data redaction (POST /v1/redact): patterns and checksums, no model. */
@Module({ controllers: [RedactController] })
export class RedactionModule {}
