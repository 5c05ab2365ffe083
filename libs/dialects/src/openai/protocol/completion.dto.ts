import { IsBoolean, IsInt, IsOptional, Max, Min } from 'class-validator';
import { SamplingFieldsDto } from '../../shared/sampling.dto';
import { IsStringOrStringArray } from '../../shared/validators';

export class CompletionRequestDto extends SamplingFieldsDto {
  @IsStringOrStringArray() prompt!: string | string[];
  @IsOptional() @IsInt() @Min(0) max_tokens?: number;
  @IsOptional() @IsInt() @Min(0) @Max(20) logprobs?: number;
  @IsOptional() @IsInt() n?: number;
  @IsOptional() @IsBoolean() echo?: boolean;
  @IsOptional() @IsBoolean() ignore_eos?: boolean;
}
