import { Inject, Injectable } from '@nestjs/common';
import { EmbeddingService } from '../../../engine/src/embeddings/embedding.service';
import { CatalogEntry, isEncoderEntry, isRerankerEntry, ModelCatalog } from '../../../store/src/catalog';
import { TEXT_CATEGORIES } from '../categories';
import { centroidsOf, Centroids, EmbeddingAnswer, nearestCentroid } from './embedding-classifier';
import { TRAINING_EXAMPLES } from './training-examples';

/** The small sentence encoder the classifier's examples were written for (Ollama's name for it too). */
const ENCODER_NAME = 'all-minilm';

/**
 * The route classifier's encoder and its trained centroids. The encoder is all-minilm: the -embed
 * encoder when it is that model, otherwise a copy in the stores; without one there is none (the
 * rules classify). It is loaded through the encoder pool at the first route that needs it, and
 * kept as the pool keeps encoders; the centroids are computed once per weights (content hash).
 */
@Injectable()
export class ClassifierEncoder {
  private trained?: { hash: string; centroids: Promise<Centroids> };

  constructor(
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    @Inject(EmbeddingService) private readonly embeddings: EmbeddingService,
  ) {}

  /** The all-minilm entry the classifier would use now; undefined: none, so rules classify. */
  find(): CatalogEntry | undefined {
    const flag = this.catalog.encoderName();
    if (flag !== undefined) {
      const entry = tryResolve(this.catalog, flag);
      if (entry && isMiniLm(entry)) return entry;
    }
    return this.catalog.list().find(isMiniLm);
  }

  /** The message's category by its vector's nearest centroid (training the centroids first, once per weights). */
  async classify(entry: CatalogEntry, text: string, signal?: AbortSignal): Promise<EmbeddingAnswer> {
    const r = await this.embeddings.embed({ model: entry.name, inputs: [text], truncate: true, signal });
    const hash = r.encoder.contentHash;
    if (this.trained?.hash !== hash) {
      const centroids = this.train(entry.name);
      this.trained = { hash, centroids };
      // A failed training is tried again by the next route.
      centroids.catch(() => {
        if (this.trained?.centroids === centroids) this.trained = undefined;
      });
    }
    return nearestCentroid(await this.trained!.centroids, r.vectors[0]);
  }

  private async train(model: string): Promise<Centroids> {
    const examples = TEXT_CATEGORIES.flatMap((category) => TRAINING_EXAMPLES[category].map((text) => ({ category, text })));
    const r = await this.embeddings.embed({ model, inputs: examples.map((e) => e.text), truncate: true });
    return centroidsOf(examples.map((e, i) => ({ category: e.category, vector: r.vectors[i] })));
  }
}

/**
 * all-minilm by its store name, its file's name or its metadata's name, and an encoder that writes
 * vectors (a cross-encoder of that name scores pairs).
 */
export function isMiniLm(e: CatalogEntry): boolean {
  if (!isEncoderEntry(e) || isRerankerEntry(e)) return false;
  const kv = e.meta?.kv ?? {};
  const names = [e.name, e.path.split('/').pop() ?? '', kv['general.name'], kv['general.basename']];
  return names.some((n) => typeof n === 'string' && n.toLowerCase().includes(ENCODER_NAME));
}

function tryResolve(catalog: ModelCatalog, name: string): CatalogEntry | undefined {
  try {
    return catalog.resolve(name);
  } catch {
    return undefined;
  }
}
