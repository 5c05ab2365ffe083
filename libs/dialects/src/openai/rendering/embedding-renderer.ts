import { EmbedResult } from '../../../../engine/src/embeddings/embedding.service';

export type EncodingFormat = 'float' | 'base64';

/** The embeddings list as OpenAI's clients read it; base64 is the vector's float32 bytes, little-endian. */
export function renderEmbeddings(r: EmbedResult, format: EncodingFormat): Record<string, unknown> {
  return {
    object: 'list',
    data: r.vectors.map((v, index) => ({ object: 'embedding', index, embedding: format === 'base64' ? base64Of(v) : Array.from(v) })),
    model: r.model,
    usage: { prompt_tokens: r.promptTokens, total_tokens: r.promptTokens },
  };
}

function base64Of(v: Float32Array): string {
  const b = Buffer.alloc(v.length * 4);
  for (let i = 0; i < v.length; i++) b.writeFloatLE(v[i], i * 4);
  return b.toString('base64');
}
