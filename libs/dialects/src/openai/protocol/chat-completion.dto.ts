import { IsArray, IsBoolean, IsInt, IsObject, IsOptional, IsString, Max, Min, ValidateIf } from 'class-validator';
import { SamplingFieldsDto } from '../../shared/sampling.dto';
import { IsStringOrObject } from '../../shared/validators';

export type ResponseFormat = { type?: string; json_schema?: { name?: string; schema?: unknown; strict?: boolean } };

export class ChatCompletionRequestDto extends SamplingFieldsDto {
  // Missing is the spec's "messages is empty" (checkMessages), not a type error.
  @IsOptional() @IsArray() messages!: Array<Record<string, unknown>>;
  @IsOptional() @IsInt() @Min(0) max_tokens?: number;
  @IsOptional() @IsInt() @Min(0) max_completion_tokens?: number;
  @IsOptional() @IsObject() response_format?: ResponseFormat;
  @IsOptional() @IsArray() tools?: Array<Record<string, unknown>>;
  @IsOptional() @ValidateIf((_o, v) => v !== null) @IsStringOrObject() tool_choice?: string | { type?: string; function?: { name?: string } };
  @IsOptional() @IsBoolean() parallel_tool_calls?: boolean;
  @IsOptional() @IsBoolean() logprobs?: boolean;
  @IsOptional() @IsInt() @Min(0) @Max(20) top_logprobs?: number;
  @IsOptional() @IsInt() n?: number | null;
  // Reasoning models (llama-server's fields): template variables, effort ("none" = no thinking),
  // and "none" to keep the thoughts in the content instead of reasoning_content.
  @IsOptional() @IsObject() chat_template_kwargs?: Record<string, unknown>;
  @IsOptional() @ValidateIf((_o, v) => v !== null) @IsString() reasoning_effort?: string | null;
  @IsOptional() @IsString() reasoning_format?: string;
  // Tokens of thought before the think block is closed (llama-server's names; -1 = no limit).
  @IsOptional() @IsInt() @Min(-1) reasoning_budget_tokens?: number;
  @IsOptional() @IsInt() @Min(-1) thinking_budget_tokens?: number;
  // user and stream_options are ignored (spec), whatever their type: not declared here.
}
