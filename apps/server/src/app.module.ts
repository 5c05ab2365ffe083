import { DynamicModule, Module } from '@nestjs/common';
import { InferenceBackend } from '../../../libs/engine/src/backend/inference-backend';
import { EngineModule } from '../../../libs/engine/src/engine.module';
import { ModelCatalog } from '../../../libs/store/src/catalog';
import { OpenAIModule } from '../../../libs/dialects/src/openai/openai.module';
import { LocalRunnerModule } from '../../../libs/dialects/src/local-runner/local-runner.module';
import { MessagesModule } from '../../../libs/dialects/src/messages/messages.module';
import { ResponsesModule } from '../../../libs/dialects/src/responses/responses.module';
import { RerankModule } from '../../../libs/dialects/src/rerank/rerank.module';
import { RedactionModule } from '../../../libs/redaction/src/redaction.module';
import { SystemOneModule } from '../../../libs/systemone/src/systemone.module';
import { RetrievalModule } from '../../../libs/retrieval/src/retrieval.module';
import { SpeechModule } from '../../../libs/speech/src/speech.module';
import { RouteModule } from '../../../libs/route/src/route.module';
import { ContextsModule } from '../../../libs/contexts/src/contexts.module';
import { McpModule } from '../../../libs/mcp/src/mcp.module';
import { StudioModule } from '../../../libs/studio/src/studio.module';
import { ObservabilityModule } from '../../../libs/observability/src/observability.module';
import { AuthModule } from '../../../libs/auth/src/auth.module';
import { ServerConfig, SERVER_CONFIG } from './config/server-config';
import { Lexicon } from '../../../libs/engine/src/constraints/lexicon';

/** The application: the engine plus one module per feature, chosen by the flags. */
@Module({})
export class AppModule {
  static forRoot(config: ServerConfig, backend: InferenceBackend): DynamicModule {
    const catalog = new ModelCatalog({ defaultModel: config.defaultModel, defaultProjector: config.projector, encoderModel: config.features.embed, rerankerModel: config.features.rerank, storeDir: config.storeDir });
    // Read at boot so a bad word list stops the server instead of failing requests.
    const lexicon = config.features.lexicon ? Lexicon.fromFile(config.features.lexicon) : undefined;
    return {
      module: AppModule,
      global: true,
      imports: [EngineModule.forRoot({ engine: config.engine, catalog, backend, lexicon }), AuthModule, ObservabilityModule, OpenAIModule, MessagesModule, ResponsesModule, RerankModule, RedactionModule, SystemOneModule, RetrievalModule, SpeechModule, RouteModule, ContextsModule, McpModule, StudioModule.forRoot(config), LocalRunnerModule],
      providers: [{ provide: SERVER_CONFIG, useValue: config }],
      exports: [SERVER_CONFIG],
    };
  }
}
