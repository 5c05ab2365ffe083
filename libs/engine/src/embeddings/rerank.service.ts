import { Inject, Injectable } from '@nestjs/common';
import { InvalidRequestError } from '../core/errors';
import { fitTokens } from './embedding.service';
import { Encoder, EncoderPool } from './encoder-pool';

export interface RerankRequest {
  /** '' = the server's reranker. */
  model: string;
  query: string;
  documents: string[];
  /** The client's: pairs not scored yet are dropped when it fires. */
  signal?: AbortSignal;
}

export interface RerankResult {
  model: string;
  /** The cross-encoder's raw relevance logit for each document, in the request's order. */
  scores: number[];
  /** Tokens read, over every (query, document) pair. */
  promptTokens: number;
}

/** The most documents one request scores. */
export const MAX_RERANK_DOCUMENTS = 2048;

/** Rerank for every route shape: each (query, document) pair through a cross-encoder. */
@Injectable()
export class RerankService {
  constructor(@Inject(EncoderPool) private readonly encoders: EncoderPool) {}

  async rerank(req: RerankRequest): Promise<RerankResult> {
    if (req.documents.length > MAX_RERANK_DOCUMENTS) throw new InvalidRequestError(`${req.documents.length} documents; at most ${MAX_RERANK_DOCUMENTS} are scored at once`);
    const { encoder, name } = await this.encoders.acquire(req.model, 'rank');
    // Held meanwhile: another request's keep_alive 0 cannot free it under this one.
    return encoder.held(() => this.rankWith(encoder, name, req));
  }

  private async rankWith(encoder: Encoder, name: string, req: RerankRequest): Promise<RerankResult> {
    const { nCtx } = encoder.embedder;
    // A query that leaves no room for a document would score every document as the same cut text.
    const [bare] = await encoder.native.rerankInputs(req.query, ['']);
    if (bare.length >= nCtx) throw new InvalidRequestError(`the query is ${bare.length} tokens with its markers; ${name} reads at most ${nCtx} a pair, with the document`);
    // A pair longer than the model reads loses the end of its document, its closing token kept
    // (as rerank services cut long documents rather than refuse them). The closing token is the
    // one the format writes after any document, as after an empty one: a BERT pair has none
    // ([CLS] q [SEP] d), and keeping its last token let a word past the cut change the score.
    const closing = bare[bare.length - 1];
    const pairs = (await encoder.native.rerankInputs(req.query, req.documents)).map((t) => (t.length <= nCtx ? t : fitTokens(t, nCtx, closing)));
    const scores = (await encoder.embed(pairs, req.signal)).map((v) => v[0]);
    return { model: name, scores, promptTokens: pairs.reduce((n, t) => n + t.length, 0) };
  }
}

/** A logit as a probability, as the hosted rerankers and text-embeddings-inference report relevance. */
export function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}
