import { IsArray, IsBoolean, IsInt, IsNumber, IsObject, IsOptional, IsString } from 'class-validator';
import { IsStringOrStringArray } from './validators';

/**
 * Sampling and svc_ extension fields shared by the chat-completions and
 * messages dialects (the local-runner dialect reads its own `options`).
 */
export class SamplingFieldsDto {
  @IsOptional() @IsString() model?: string;
  @IsOptional() @IsNumber() temperature?: number;
  @IsOptional() @IsNumber() top_p?: number;
  @IsOptional() @IsInt() top_k?: number;
  @IsOptional() @IsNumber() min_p?: number;
  @IsOptional() @IsNumber() typical_p?: number;
  @IsOptional() @IsInt() seed?: number;
  @IsOptional() @IsNumber() presence_penalty?: number;
  @IsOptional() @IsNumber() frequency_penalty?: number;
  @IsOptional() @IsNumber() repeat_penalty?: number;
  @IsOptional() @IsInt() repeat_last_n?: number;
  @IsOptional() @IsObject() logit_bias?: Record<string, number>;
  @IsOptional() @IsStringOrStringArray() stop?: string | string[];
  @IsOptional() @IsBoolean() stream?: boolean;

  @IsOptional() @IsString() svc_session?: string;
  @IsOptional() @IsBoolean() svc_retain_prefix?: boolean;
  /** llama-server's field: false = this request does not start from a retained prompt. */
  @IsOptional() @IsBoolean() cache_prompt?: boolean;
  @IsOptional() @IsObject() svc_schema?: Record<string, unknown>;
  @IsOptional() @IsString() svc_format?: string;
  @IsOptional() @IsString() svc_grammar?: string;
  @IsOptional() @IsString() grammar?: string;
  @IsOptional() @IsBoolean() svc_lexicon?: boolean;
  @IsOptional() @IsBoolean() svc_lexicon_strict?: boolean;
  @IsOptional() @IsNumber() svc_dry_multiplier?: number;
  @IsOptional() @IsNumber() svc_dry_base?: number;
  @IsOptional() @IsInt() svc_dry_allowed_length?: number;
  @IsOptional() @IsArray() @IsInt({ each: true }) svc_banned_tokens?: number[];
}
