import { IsBoolean, IsInt, IsOptional, IsString, Max, Min } from 'class-validator';

/** POST /v1/retrieve. */
export class RetrieveRequestDto {
  @IsOptional() @IsString() query?: string;
  @IsOptional() @IsInt() @Min(1) @Max(50) top_k?: number;
  @IsOptional() @IsBoolean() rerank?: boolean;
}
