import { DynamicModule, Global, Module } from '@nestjs/common';
import { ModelCatalog } from '../../store/src/catalog';
import { InferenceBackend } from './backend/inference-backend';
import { EngineConfig, ENGINE_CONFIG } from './engine-config';
import { Lexicon } from './constraints/lexicon';
import { EngineService, LEXICON } from './engine.service';
import { ModelManager } from './models/model-manager';
import { EmbeddingService } from './embeddings/embedding.service';
import { EncoderPool } from './embeddings/encoder-pool';
import { RerankService } from './embeddings/rerank.service';
import { NextTokenScorer } from './decisions/next-token-scorer';

export interface EngineModuleOptions {
  engine: EngineConfig;
  catalog: ModelCatalog;
  /** Built by the caller (the server picks the addon at boot; tests may pass a fake). */
  backend: InferenceBackend;
  /** The -lexicon word list, loaded at boot. */
  lexicon?: Lexicon;
}

/** The engine library as a Nest module: backend, catalog, model manager and encoders, the generation, embedding, rerank and next-token scoring services. */
@Global()
@Module({})
export class EngineModule {
  static forRoot(o: EngineModuleOptions): DynamicModule {
    return {
      module: EngineModule,
      providers: [
        { provide: ENGINE_CONFIG, useValue: o.engine },
        { provide: InferenceBackend, useValue: o.backend },
        { provide: ModelCatalog, useValue: o.catalog },
        { provide: LEXICON, useValue: o.lexicon ?? null },
        { provide: ModelManager, useFactory: (b: InferenceBackend, c: ModelCatalog) => new ModelManager(b, c, o.engine), inject: [InferenceBackend, ModelCatalog] },
        { provide: EncoderPool, useFactory: (b: InferenceBackend, c: ModelCatalog) => new EncoderPool(b, c, o.engine), inject: [InferenceBackend, ModelCatalog] },
        EngineService,
        EmbeddingService,
        RerankService,
        NextTokenScorer,
      ],
      exports: [LEXICON, ENGINE_CONFIG, InferenceBackend, ModelCatalog, ModelManager, EncoderPool, EngineService, EmbeddingService, RerankService, NextTokenScorer],
    };
  }
}
