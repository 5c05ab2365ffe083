import { IsOptional, IsString, ValidateIf } from 'class-validator';

/** POST /v1/systemone. state and questions have several shapes each: questions.ts checks them and words each refusal. */
export class DecisionRequestDto {
  @IsOptional() @IsString() model?: string;
  /** As on /api/chat: a duration string or seconds. */
  @IsOptional() @ValidateIf((_o, v) => typeof v !== 'number') @IsString() keep_alive?: string | number;
  state?: unknown;
  questions?: unknown;
}
