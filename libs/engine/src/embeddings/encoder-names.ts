import { CatalogEntry, isEncoderEntry, isRerankerEntry, ModelCatalog } from '../../../store/src/catalog';
import { InvalidRequestError, NoModelError } from '../core/errors';

/**
 * Which encoder a request's model name stands for, for a use: '' is the flag's (-embed,
 * -rerank), else the default model when it is one (-m), else the first listed. A name must be one
 * for that use; another model's is refused naming one there is.
 */
export class EncoderNames {
  constructor(private readonly catalog: ModelCatalog) {}

  forEmbedding(name: string): CatalogEntry {
    const encName = this.catalog.encoderName();
    if (name === '') {
      if (encName !== undefined) return vectorEncoder(this.catalog.resolve(encName));
      const def = this.defaultEntry();
      if (def && isVectorEncoder(def)) return def;
      const any = this.firstListed(isVectorEncoder);
      if (any) return any;
      // No default (only rerankers or projectors listed): the first listed one's refusal; none: 503.
      const other = def ?? this.catalog.list()[0];
      if (!other) throw new NoModelError();
      return vectorEncoder(other, noEncoder(other.name));
    }
    const entry = this.catalog.resolve(name, { encoding: true });
    if (isVectorEncoder(entry) || isRerankerEntry(entry)) return vectorEncoder(entry);
    const enc = encName ?? this.firstListed(isVectorEncoder)?.name;
    if (enc !== undefined) throw new InvalidRequestError(`${entry.name} is a decoder and cannot embed; this server's encoder is ${enc}`);
    throw noEncoder(entry.name);
  }

  forRerank(name: string): CatalogEntry {
    const flag = this.catalog.rerankerName();
    if (name === '') {
      if (flag !== undefined) return this.reranker(this.catalog.resolve(flag), flag);
      const def = this.defaultEntry();
      const any = def && isRerankerEntry(def) ? def : this.firstListed(isRerankerEntry);
      if (any) return any;
      // An empty catalog is the no-model state (503).
      if (!def && this.catalog.list().length === 0) throw new NoModelError();
      throw new InvalidRequestError('this server has no reranker: start it with -rerank <model>');
    }
    return this.reranker(this.catalog.resolve(name, { encoding: true }), flag ?? this.firstListed(isRerankerEntry)?.name);
  }

  /** The entry if it is a cross-encoder (-rerank naming an encoder is refused here too), else a 400 naming one there is. */
  private reranker(entry: CatalogEntry, other: string | undefined): CatalogEntry {
    if (isRerankerEntry(entry)) return entry;
    const there = other !== undefined && other !== entry.name ? `; this server's reranker is ${other}` : '';
    throw new InvalidRequestError(`${entry.name} is not a reranker (a cross-encoder)${there}`);
  }

  /** The default model's entry; undefined where there is none (only encoders, or nothing, listed). */
  private defaultEntry(): CatalogEntry | undefined {
    if (this.catalog.defaultName() === undefined) return undefined;
    try {
      return this.catalog.resolve('', { encoding: true });
    } catch (err) {
      // -m names a store model not pulled yet: the encoders listed still serve.
      if (err instanceof NoModelError) return undefined;
      throw err;
    }
  }

  private firstListed(test: (e: CatalogEntry) => boolean): CatalogEntry | undefined {
    return this.catalog.list().find(test);
  }

  /** The encoders the flags name (-m, -embed, -rerank) stay loaded until a request sets a keep_alive. */
  flagged(entry: CatalogEntry): boolean {
    const names = [this.catalog.encoderName(), this.catalog.rerankerName()];
    const def = this.catalog.defaultName();
    return [...names, def].some((n) => n !== undefined && this.catalogPath(n) === entry.path);
  }

  private catalogPath(name: string): string | undefined {
    try {
      return this.catalog.resolve(name).path;
    } catch {
      return undefined;
    }
  }
}

/** The entry if it writes vectors; a cross-encoder (even as -embed) is refused, as is a decoder with `orElse`. */
function vectorEncoder(e: CatalogEntry, orElse?: Error): CatalogEntry {
  if (isVectorEncoder(e)) return e;
  if (isRerankerEntry(e)) throw new InvalidRequestError(`${e.name} is a cross-encoder (a reranker): it scores pairs and writes no embeddings`);
  throw orElse ?? noEncoder(e.name);
}

/** An encoder that writes vectors (a cross-encoder writes pair scores). */
function isVectorEncoder(e: CatalogEntry): boolean {
  return isEncoderEntry(e) && !isRerankerEntry(e);
}

function noEncoder(decoder: string): Error {
  return new InvalidRequestError(`this server is serving ${decoder}, a decoder, and has no encoder loaded`);
}
