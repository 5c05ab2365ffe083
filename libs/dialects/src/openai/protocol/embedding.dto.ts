import { IsInt, IsOptional, IsString } from 'class-validator';

export class EmbeddingRequestDto {
  @IsOptional() @IsString() model?: string;
  /** A string or an array of strings: checked by embeddingInputs, which words each refusal as the spec does. */
  input?: unknown;
  @IsOptional() @IsString() encoding_format?: string;
  @IsOptional() @IsInt() dimensions?: number;
  @IsOptional() @IsString() user?: string;
}
