import { IsArray, IsInt, IsObject, IsOptional, Min, ValidateIf } from 'class-validator';
import { SamplingFieldsDto } from '../../shared/sampling.dto';
import { IsStringOrStringArray } from '../../shared/validators';

/** A content block as sent; each block type is checked field by field in the mapper. */
export type MessagesBlock = Record<string, unknown> & { type?: unknown };

export interface MessagesInputMessage {
  role?: unknown;
  content?: string | MessagesBlock[];
}

export interface MessagesTool {
  type?: string;
  name?: string;
  description?: string;
  input_schema?: Record<string, unknown>;
}

export interface MessagesToolChoice {
  type?: string;
  name?: string;
  disable_parallel_tool_use?: boolean;
}

/**
 * POST /v1/messages (and /v1/messages/count_tokens, which reads the prompt
 * fields only). Sampling and svc_ extension fields come from SamplingFieldsDto;
 * `stop` from there is not this dialect's field and is not read.
 */
export class MessagesRequestDto extends SamplingFieldsDto {
  // Missing is the spec's "messages is empty" (checkMessages), not a type error.
  @IsOptional() @IsArray() messages!: MessagesInputMessage[];
  // A string or an array of text blocks (checked in the mapper).
  @IsOptional() @ValidateIf((_o, v) => typeof v !== 'string') @IsArray() system?: string | MessagesBlock[];
  @IsOptional() @IsInt() @Min(1) max_tokens?: number;
  @IsOptional() @IsStringOrStringArray() stop_sequences?: string[] | string;
  @IsOptional() @IsArray() tools?: MessagesTool[];
  @IsOptional() @IsObject() tool_choice?: MessagesToolChoice;
  @IsOptional() @IsObject() metadata?: Record<string, unknown>;
  // Extended thinking: enabled/adaptive let a reasoning model think (its default), disabled asks it not to.
  @IsOptional() @IsObject() thinking?: { type?: unknown; budget_tokens?: unknown };
  // Not part of this dialect; refused with a clear 400 rather than silently dropped.
  @IsOptional() logprobs?: unknown;
}
