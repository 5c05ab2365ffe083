import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { InvalidRequestError } from '../../engine/src/core/errors';
import { DETECTOR_TYPES } from './detectors';
import { RedactRequestDto } from './redact.dto';
import { redact, Redacted } from './redactor';

/** POST /v1/redact: personal data found by pattern and replaced by tags. Loads no model. */
@Controller('v1')
export class RedactController {
  @Post('redact')
  @HttpCode(200)
  redact(@Body() dto: RedactRequestDto): Redacted {
    if (typeof dto.text !== 'string') throw new InvalidRequestError(dto.text === undefined || dto.text === null ? 'text is required' : 'cannot parse request: text must be a string');
    return redact(dto.text, typesOf(dto.types));
  }
}

function typesOf(v: unknown): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every((t) => typeof t === 'string')) throw new InvalidRequestError('cannot parse request: types must be an array of strings');
  for (const t of v) {
    if (!DETECTOR_TYPES.includes(t.toLowerCase())) throw new InvalidRequestError(`unknown redaction type ${JSON.stringify(t)}; known: ${DETECTOR_TYPES.join(', ')}`);
  }
  return v.map((t) => t.toLowerCase());
}
