import { Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { ServerConfig, SERVER_CONFIG } from '../../../apps/server/src/config/server-config';
import type { Caller } from '../../auth/src/caller';
import { AuthService } from '../../auth/src/auth.service';
import { EngineError, InvalidRequestError } from '../../engine/src/core/errors';
import { EmbeddingService } from '../../engine/src/embeddings/embedding.service';
import { EncoderPool } from '../../engine/src/embeddings/encoder-pool';
import { RerankService, sigmoid } from '../../engine/src/embeddings/rerank.service';
import { DocumentIndex, Hit, IndexEmbedder } from './index/document-index';

export interface RetrieveQuery {
  query: string;
  topK: number;
  rerank: boolean;
  caller: Caller;
  signal?: AbortSignal;
}

export interface RetrievedChunk extends Hit {
  /** The cross-encoder's relevance (sigmoid of its logit) when the request asked to rerank. */
  rerankScore: number | null;
}

export interface RetrieveResult {
  /** The encoder that embedded the query. */
  model: string;
  /** The encoder the index's vectors came from. */
  indexModel: string;
  chunks: RetrievedChunk[];
}

/** Candidates a rerank scores, per result asked for (at least RERANK_MIN, at most RERANK_MAX). */
const RERANK_WIDTH = 4;
const RERANK_MIN = 20;
const RERANK_MAX = 200;
/** A retrieve this soon after the last look at the folder answers from the index as it is. */
const RESCAN_MS = 1000;

/**
 * Document retrieval (-index with -embed): the index folder's documents,
 * chunked and embedded with the server's encoder, searched by cosine
 * similarity, optionally reranked by the -rerank cross-encoder, and filtered by
 * the caller's labels. The folder is looked at again (sizes and mtimes) before
 * a retrieve at most once a second, so added, changed and removed documents
 * count without a restart.
 */
@Injectable()
export class RetrievalService implements OnApplicationBootstrap {
  private readonly log = new Logger('retrieval');
  private readonly index?: DocumentIndex;
  private readonly embedder: IndexEmbedder;
  private refreshing?: Promise<void>;
  private lastLook = -Infinity;

  private readonly indexDir: string;

  constructor(
    @Inject(SERVER_CONFIG) config: ServerConfig,
    @Inject(EncoderPool) private readonly encoders: EncoderPool,
    @Inject(AuthService) private readonly auth: AuthService,
    @Inject(EmbeddingService) private readonly embeddings: EmbeddingService,
    @Inject(RerankService) private readonly reranker: RerankService,
  ) {
    this.indexDir = resolve(config.features.indexDir);
    if (config.features.index) this.index = new DocumentIndex(this.indexDir, (m) => this.log.warn(m));
    this.embedder = {
      identity: async () => {
        const { encoder, name } = await encoders.acquire('', 'embed');
        return { name, hash: encoder.contentHash, dims: encoder.embedder.nEmbd };
      },
      embed: async (texts) => (await embeddings.embed({ model: '', inputs: texts, truncate: true })).vectors,
    };
  }

  /** The index file is read and brought up to date at boot, so the first retrieve does not wait for it. */
  onApplicationBootstrap(): void {
    if (!this.index) return;
    // A mistyped folder would look like an empty index: said once (it may be made later, and is read then).
    if (!existsSync(this.indexDir)) this.log.warn(`index: ${this.indexDir} does not exist (yet): no documents until it does`);
    this.index.load();
    this.current().then(
      () => this.log.log(`index: ${this.index!.documentCount} documents, ${this.index!.chunkCount} chunks, embedded with ${this.index!.model}`),
      (err: Error) => this.log.warn(`index: not built at boot: ${err.message}`),
    );
  }

  async retrieve(q: RetrieveQuery): Promise<RetrieveResult> {
    if (!this.index) throw new InvalidRequestError('retrieval is off: start the server with -index and -embed <encoder>');
    // A rerank without a reranker is refused whatever the index holds (not only when it finds something).
    if (q.rerank) await this.encoders.acquire('', 'rank');
    await this.current();
    const emb = await this.embeddings.embed({ model: '', inputs: [q.query], truncate: true, signal: q.signal });
    // On a server that names its callers every caller sees what its labels allow (a bare -api-key
    // caller holds none); a server that names nobody has no one to keep documents from.
    const held = q.caller.labels;
    const visible = this.auth.namesCallers ? (labels: string[]) => labels.every((l) => held.includes(l)) : () => true;
    if (!q.rerank) {
      const hits = this.index.search(emb.vectors[0], visible, q.topK);
      return { model: emb.model, indexModel: this.index.model ?? emb.model, chunks: hits.map((h) => ({ ...h, rerankScore: null })) };
    }
    const width = Math.min(RERANK_MAX, Math.max(q.topK * RERANK_WIDTH, RERANK_MIN));
    const hits = this.index.search(emb.vectors[0], visible, width);
    const scores = hits.length ? (await this.reranker.rerank({ model: '', query: q.query, documents: hits.map((h) => h.chunk.text), signal: q.signal })).scores : [];
    const chunks = hits.map((h, i) => ({ ...h, rerankScore: sigmoid(scores[i]) })).sort((a, b) => b.rerankScore - a.rerankScore);
    return { model: emb.model, indexModel: this.index.model ?? emb.model, chunks: chunks.slice(0, q.topK) };
  }

  /** Brings the index up to date with its folder (one refresh at a time; callers meanwhile share it). */
  private async current(): Promise<void> {
    if (!this.refreshing && performance.now() - this.lastLook < RESCAN_MS) return;
    this.refreshing ??= this.index!.refresh(this.embedder).then(
      () => {
        this.lastLook = performance.now();
        this.refreshing = undefined;
      },
      (err: Error) => {
        this.refreshing = undefined;
        // No encoder (a 400 that names what to start the server with) passes as it is; the rest is the index's fault.
        throw err instanceof EngineError ? err : new EngineError(`the index cannot be brought up to date: ${err.message}`, 500);
      },
    );
    return this.refreshing;
  }
}
