import { IsBoolean, IsInt, IsOptional, IsString } from 'class-validator';

/**
 * Both shapes of a rerank request: `documents` (Cohere, Jina, llama-server) or `texts`
 * (text-embeddings-inference). query, documents and texts are checked by the mapper, which
 * words each refusal as the spec does.
 */
export class RerankRequestDto {
  @IsOptional() @IsString() model?: string;
  query?: unknown;
  documents?: unknown;
  texts?: unknown;
  @IsOptional() @IsInt() top_n?: number;
  @IsOptional() @IsInt() top_k?: number;
  @IsOptional() @IsBoolean() raw_scores?: boolean;
  @IsOptional() @IsBoolean() return_documents?: boolean;
  @IsOptional() @IsBoolean() return_text?: boolean;
}
