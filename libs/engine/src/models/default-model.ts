import { CatalogEntry, isEncoderEntry, isRerankerEntry } from '../../../store/src/catalog';
import { EncoderPool } from '../embeddings/encoder-pool';
import { ModelManager } from './model-manager';

/** Weights the server serves, as /healthz names them: a generating model or an encoder. */
export interface ServedWeights {
  readonly entry: CatalogEntry;
  readonly name: string;
  /** sha256 of the file. */
  readonly contentHash: string;
}

/** Loads the default model (boot, or the first pull) to stay: an encoder given as -m goes to the encoders. */
export async function loadDefaultModel(models: ModelManager, encoders: EncoderPool): Promise<ServedWeights> {
  const entry = models.catalog.resolve('', { generating: true });
  if (isEncoderEntry(entry)) return (await encoders.acquire(entry.name, isRerankerEntry(entry) ? 'rank' : 'embed')).encoder;
  return models.acquire('', { stay: true });
}
