import { IsArray, IsBoolean, IsInt, IsObject, IsOptional, IsString, Max, Min, ValidateIf } from 'class-validator';
import { SamplingFieldsDto } from '../../shared/sampling.dto';
import { IsStringOrObject } from '../../shared/validators';
import { IsStringOrArray } from './is-string-or-array';

/** One input item as sent; each item type is checked field by field in the mapper. */
export type ResponsesInputItem = Record<string, unknown> & { type?: unknown; role?: unknown; content?: unknown };

/** A function tool in the flat Responses shape ({type, name, description, parameters, strict}). */
export type ResponsesTool = Record<string, unknown> & { type?: unknown; name?: unknown };

export interface ResponsesTextFormat {
  type?: string;
  name?: string;
  schema?: unknown;
  strict?: boolean;
}

/**
 * POST /v1/responses. Sampling, stop, stream and svc_ extension fields come from
 * SamplingFieldsDto (svc_session is refused: previous_response_id is this
 * dialect's way to continue a context).
 */
export class ResponsesRequestDto extends SamplingFieldsDto {
  @IsStringOrArray() input!: string | ResponsesInputItem[];
  @IsOptional() @IsString() instructions?: string;
  @IsOptional() @IsInt() @Min(1) max_output_tokens?: number;
  @IsOptional() @IsString() previous_response_id?: string;
  @IsOptional() @IsBoolean() store?: boolean;
  @IsOptional() @IsArray() tools?: ResponsesTool[];
  @IsOptional() @ValidateIf((_o, v) => v !== null) @IsStringOrObject() tool_choice?: string | { type?: string; name?: string };
  @IsOptional() @IsBoolean() parallel_tool_calls?: boolean;
  @IsOptional() @IsObject() text?: { format?: ResponsesTextFormat };
  @IsOptional() @IsObject() metadata?: Record<string, string>;
  // A reasoning model's effort ("none" = no thinking); the summary is not produced here.
  @IsOptional() @IsObject() reasoning?: { effort?: string | null; summary?: unknown };
  // Tokens of thought before the think block is closed (llama-server's extension fields, as on chat completions).
  @IsOptional() @IsInt() @Min(-1) reasoning_budget_tokens?: number;
  @IsOptional() @IsInt() @Min(-1) thinking_budget_tokens?: number;
  // The answer's token log-probabilities: asked for with include "message.output_text.logprobs" or top_logprobs.
  @IsOptional() @IsInt() @Min(0) @Max(20) top_logprobs?: number;
  // Other values name output this server does not produce (search results, encrypted reasoning): nothing to add.
  @IsOptional() @IsArray() @IsString({ each: true }) include?: string[];
  // Read by nobody, accepted for compatibility with the official clients.
  @IsOptional() @IsString() user?: string;
}
