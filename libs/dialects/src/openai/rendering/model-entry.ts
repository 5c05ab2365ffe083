import { CatalogEntry, isRerankerEntry } from '../../../../store/src/catalog';

/** One entry of GET /v1/models. */
export function modelEntry(e: CatalogEntry): Record<string, unknown> {
  return {
    id: e.name,
    object: 'model',
    created: Math.floor(e.modifiedAt.getTime() / 1000),
    owned_by: e.source === 'ollama' ? 'ollama' : 'svc',
    capabilities: e.capabilities,
    // A cross-encoder lists as `embeddings` (the spec's values), yet only ranks: say which it is.
    ...(isRerankerEntry(e) ? { svc_reranker: true } : {}),
  };
}
