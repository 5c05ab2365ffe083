import { RerankResult, sigmoid } from '../../../../engine/src/embeddings/rerank.service';
import { RerankAsk } from '../rerank-request';

export interface RerankRenderOptions {
  /** Texts form: scores as the model's logits rather than probabilities. */
  rawScores: boolean;
  /** Texts form: each result carries its text. */
  returnText: boolean;
  /** Documents form: each result carries its document (default true). */
  returnDocuments: boolean;
}

/** Indexes best first, cut to `keep`. */
function ranked(r: RerankResult, keep?: number): number[] {
  const order = r.scores.map((_, i) => i).sort((a, b) => r.scores[b] - r.scores[a] || a - b);
  return keep === undefined ? order : order.slice(0, keep);
}

/**
 * The answer in the request's shape. Documents form: `relevance_score` a probability (the
 * logit's sigmoid, as Cohere and Jina report it), `score` the logit (llama-server's value).
 * Texts form: a bare array, `score` a probability unless raw_scores (text-embeddings-inference).
 */
export function renderRerank(ask: RerankAsk, r: RerankResult, o: RerankRenderOptions): unknown {
  const order = ranked(r, ask.keep);
  if (ask.shape === 'texts') {
    return order.map((index) => ({ index, score: o.rawScores ? r.scores[index] : sigmoid(r.scores[index]), ...(o.returnText ? { text: ask.texts[index] } : {}) }));
  }
  return {
    model: r.model,
    results: order.map((index) => ({
      index,
      relevance_score: sigmoid(r.scores[index]),
      score: r.scores[index],
      ...(o.returnDocuments ? { document: { text: ask.texts[index] } } : {}),
    })),
    usage: { prompt_tokens: r.promptTokens, total_tokens: r.promptTokens },
  };
}
