import { InvalidRequestError } from '../../../engine/src/core/errors';
import { RerankRequestDto } from './protocol/rerank.dto';

/** What a rerank request asks, whichever shape it came in. */
export interface RerankAsk {
  shape: 'documents' | 'texts';
  query: string;
  texts: string[];
  /** How many results to keep, best first (undefined: all). */
  keep?: number;
}

/** The request's shape, query, texts and cut; refusals in the spec's words. */
export function readRerank(d: RerankRequestDto): RerankAsk {
  if (typeof d.query !== 'string' || d.query === '') throw new InvalidRequestError(d.query === undefined || d.query === null || d.query === '' ? 'query is required' : 'cannot parse request: query must be a string');
  // top_k is read only when top_n is absent (spec).
  const keep = d.top_n ?? d.top_k;
  if (keep !== undefined && keep < 1) throw new InvalidRequestError(`${d.top_n !== undefined ? 'top_n' : 'top_k'} must be 1 or more, got ${keep}`);
  if (d.texts !== undefined && d.texts !== null) {
    if (!Array.isArray(d.texts)) throw new InvalidRequestError('cannot parse request: texts must be an array of strings');
    if (d.texts.length === 0) throw new InvalidRequestError('texts is an empty array');
    return { shape: 'texts', query: d.query, texts: d.texts.map((t, i) => textAt(t, `texts[${i}]`, false)), keep };
  }
  if (!Array.isArray(d.documents) || d.documents.length === 0) throw new InvalidRequestError(d.documents === undefined || d.documents === null || Array.isArray(d.documents) ? 'no documents' : 'cannot parse request: documents must be an array');
  return { shape: 'documents', query: d.query, texts: d.documents.map((t, i) => textAt(t, `documents[${i}]`, true)), keep };
}

/** A document is a string, or (documents form) an object with a text, as Cohere's and Jina's clients send it. */
function textAt(v: unknown, at: string, objects: boolean): string {
  if (typeof v === 'string') return v;
  if (objects && v !== null && typeof v === 'object' && typeof (v as { text?: unknown }).text === 'string') return (v as { text: string }).text;
  throw new InvalidRequestError(`cannot parse request: ${at} must be a string${objects ? ' or an object with a text' : ''}`);
}
