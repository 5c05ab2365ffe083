import { IsBoolean, IsInt, IsObject, IsOptional, IsString, Max, Min } from 'class-validator';
import type { ResponseFormat } from './chat-completion.dto';
import { SamplingFieldsDto } from '../../shared/sampling.dto';
import { IsStringOrStringArray } from '../../shared/validators';

export class CompletionRequestDto extends SamplingFieldsDto {
  @IsStringOrStringArray() prompt!: string | string[];
  @IsOptional() @IsInt() @Min(0) max_tokens?: number;
  // The rest of chat's sampling fields (spec: completions take the same).
  @IsOptional() @IsInt() @Min(0) max_completion_tokens?: number;
  @IsOptional() @IsObject() response_format?: ResponseFormat;
  @IsOptional() @IsInt() @Min(0) @Max(20) logprobs?: number | null;
  @IsOptional() @IsInt() n?: number | null;
  @IsOptional() @IsBoolean() echo?: boolean;
  // Text after the insertion: the completion fills in the middle (a model with FIM tokens).
  @IsOptional() @IsString() suffix?: string | null;
  @IsOptional() @IsBoolean() ignore_eos?: boolean;
}
