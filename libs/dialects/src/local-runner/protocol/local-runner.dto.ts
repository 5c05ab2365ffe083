import { Type } from 'class-transformer';
import { IsArray, IsBoolean, IsInt, IsNumber, IsObject, IsOptional, IsString, Max, Min, ValidateIf, ValidateNested } from 'class-validator';
import { IsStringOrObject, IsStringOrStringArray } from '../../shared/validators';

/**
 * Runtime options as the local-runner's clients send them. Load-time options
 * (num_ctx, num_gpu, num_thread...) are accepted and ignored: the one loaded
 * copy of the model is shared by every request and dialect.
 */
export class RunnerOptionsDto {
  @IsOptional() @IsNumber() temperature?: number;
  @IsOptional() @IsNumber() top_p?: number;
  @IsOptional() @IsInt() top_k?: number;
  @IsOptional() @IsNumber() min_p?: number;
  @IsOptional() @IsNumber() typical_p?: number;
  @IsOptional() @IsInt() seed?: number;
  @IsOptional() @IsInt() num_predict?: number;
  @IsOptional() @IsStringOrStringArray() stop?: string | string[];
  @IsOptional() @IsNumber() repeat_penalty?: number;
  @IsOptional() @IsInt() repeat_last_n?: number;
  @IsOptional() @IsNumber() presence_penalty?: number;
  @IsOptional() @IsNumber() frequency_penalty?: number;
  @IsOptional() @IsInt() num_ctx?: number;
}

/** Fields /api/generate and /api/chat share. */
class RunnerRequestBase {
  @IsOptional() @IsString() model?: string;
  // "json", "" or a JSON Schema object.
  @IsOptional() @IsStringOrObject() format?: string | Record<string, unknown>;
  @IsOptional() @ValidateNested() @Type(() => RunnerOptionsDto) options?: RunnerOptionsDto;
  @IsOptional() @IsBoolean() stream?: boolean;
  // A duration string or seconds.
  @IsOptional() @ValidateIf((_o, v) => typeof v !== 'number') @IsString() keep_alive?: string | number;
  @IsOptional() @IsString() svc_session?: string;
  // Log-probabilities of the answer's tokens (raw logits, as every dialect), with up to 20 alternatives each.
  @IsOptional() @IsBoolean() logprobs?: boolean;
  @IsOptional() @IsInt() @Min(0) @Max(20) top_logprobs?: number;
  // Reasoning models: true/false, or a level (high, medium, low) the template reads as its effort; checked in the mapper.
  @IsOptional() think?: unknown;
}

export class GenerateRequestDto extends RunnerRequestBase {
  @IsOptional() @IsString() prompt?: string;
  @IsOptional() @IsString() system?: string;
  // Fill in the middle: the answer goes between prompt and suffix (models with FIM tokens).
  @IsOptional() @IsString() suffix?: string;
  @IsOptional() @IsBoolean() raw?: boolean;
  @IsOptional() @IsArray() @IsString({ each: true }) images?: string[];
  // A previous answer's `context` (token ids; deprecated in the local runner, still sent by its clients).
  @IsOptional() @IsArray() @IsInt({ each: true }) context?: number[];
}

export interface RunnerToolCall {
  id?: string;
  function?: { name?: unknown; arguments?: unknown };
}

export interface RunnerMessage {
  role?: unknown;
  content?: unknown;
  images?: unknown;
  tool_calls?: RunnerToolCall[];
  tool_name?: unknown;
  thinking?: unknown;
}

export class ChatRequestDto extends RunnerRequestBase {
  // Missing is the spec's "messages is empty" (checkMessages), not a type error.
  @IsOptional() @IsArray() messages!: RunnerMessage[];
  @IsOptional() @IsArray() tools?: Array<Record<string, unknown>>;
}

export class ShowRequestDto {
  @IsOptional() @IsString() model?: string;
  // The name older clients send.
  @IsOptional() @IsString() name?: string;
  @IsOptional() @IsBoolean() verbose?: boolean;
}

/** /api/embed. options are accepted and not read (the encoder's context is the model's). */
export class EmbedRequestDto {
  @IsOptional() @IsString() model?: string;
  /** A string or an array of strings (embeddingInputs words each refusal). */
  @IsOptional() input?: unknown;
  @IsOptional() @IsBoolean() truncate?: boolean;
  @IsOptional() @IsInt() dimensions?: number;
  @IsOptional() @ValidateIf((_o, v) => typeof v !== 'number') @IsString() keep_alive?: string | number;
  @IsOptional() @IsObject() options?: Record<string, unknown>;
}

/** /api/embeddings, the older route: one prompt. */
export class LegacyEmbeddingRequestDto {
  @IsOptional() @IsString() model?: string;
  @IsOptional() prompt?: unknown;
  @IsOptional() @ValidateIf((_o, v) => typeof v !== 'number') @IsString() keep_alive?: string | number;
  @IsOptional() @IsObject() options?: Record<string, unknown>;
}

