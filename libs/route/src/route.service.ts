import { Inject, Injectable, Logger } from '@nestjs/common';
import { EngineError } from '../../engine/src/core/errors';
import { ModelManager } from '../../engine/src/models/model-manager';
import { CatalogEntry, ModelCatalog } from '../../store/src/catalog';
import { Classification, LENGTH_THRESHOLD, round2 } from './categories';
import { ClassifierEncoder } from './classify/classifier-encoder';
import { classifyByRules } from './classify/rules-classifier';
import { Preference } from './protocol/route.dto';
import { estimateTokens, fitsContext } from './rank/fit';
import { Candidate, pick, rankModels } from './rank/model-ranker';
import { isChatEntry, traitsOf } from './rank/model-traits';
import { RouteInput } from './route-input';

/**
 * POST /v1/route: classifies a message, then ranks the installed chat models for its category.
 * Nothing here loads a chat model or generates: models are judged by their metadata and the
 * engine's memory estimate; only the classifier's small encoder is loaded, at the first route.
 */
@Injectable()
export class RouteService {
  private readonly log = new Logger('route');

  constructor(
    @Inject(ModelCatalog) private readonly catalog: ModelCatalog,
    @Inject(ModelManager) private readonly models: ModelManager,
    @Inject(ClassifierEncoder) private readonly encoder: ClassifierEncoder,
  ) {}

  async route(input: RouteInput, prefer: Preference, signal?: AbortSignal): Promise<Record<string, unknown>> {
    const encoder = this.encoder.find();
    const cls = await this.classify(input, encoder, signal);
    const tokens = estimateTokens(input);
    // Listed names are unique (the catalog keeps the first of a name): the chosen one's file by name.
    const paths = new Map<string, string>();
    const candidates: Candidate[] = this.catalog
      .list()
      .filter(isChatEntry)
      .map((e) => {
        paths.set(e.name, e.path);
        const traits = traitsOf(e, this.models.positionsFor(e));
        return { ...traits, fitsContext: fitsContext(tokens, traits.context), fitsMemory: this.models.estimate(e) <= this.models.memoryRoom(e.path) };
      });
    const ranked = rankModels(cls.category, candidates);
    const picked = pick(ranked, prefer);
    const chosen = picked?.chosen.candidate;
    return {
      object: 'route',
      category: cls.category,
      confidence: cls.confidence,
      method: cls.method,
      reason: cls.reason,
      model: chosen?.name ?? '',
      model_reason: picked ? `${picked.reason}: ${picked.chosen.reason}${cls.category === 'image' && !chosen!.vision ? '; it cannot see the picture (no installed chat model has a vision projector)' : ''}` : 'no chat model is installed',
      vision: chosen?.vision ?? false,
      fits: chosen ? chosen.fitsContext && chosen.fitsMemory : false,
      // Neither answer when there is no model to fit.
      fits_memory: chosen ? chosen.fitsMemory : null,
      memory_budget_bytes: this.models.memoryRoom(chosen && paths.get(chosen.name)),
      context: chosen?.context ?? null,
      estimated_tokens: tokens,
      encoder: encoder?.name ?? null,
      candidates: ranked.map((s) => ({ model: s.candidate.name, score: s.score, reason: s.reason, params: s.candidate.params, context: s.candidate.context, vision: s.candidate.vision })),
    };
  }

  /** An attached picture, then the length, then the encoder's centroids, else the rules. */
  private async classify(input: RouteInput, encoder: CatalogEntry | undefined, signal?: AbortSignal): Promise<Classification> {
    if (input.pictures > 0) {
      return { category: 'image', confidence: 1, method: 'attachment', reason: `${input.pictures} picture${input.pictures > 1 ? 's' : ''} attached` };
    }
    if (input.chars > LENGTH_THRESHOLD) {
      return { category: 'long-context', confidence: 1, method: 'length', reason: `${input.chars} characters, over ${LENGTH_THRESHOLD}` };
    }
    let failed = '';
    if (encoder) {
      try {
        const r = await this.encoder.classify(encoder, input.text, signal);
        const [first, second] = r.similarities;
        const next = second ? `; next ${second.category} ${round2(second.cosine)}` : '';
        return { category: r.category, confidence: r.confidence, method: 'embedding', reason: `nearest examples: ${first.category} (cosine ${round2(first.cosine)}${next})` };
      } catch (err) {
        // Capacity, a client gone, shutdown: the request's own fate. Anything else (an encoder
        // that will not load) leaves the rules to answer rather than failing every route.
        if (err instanceof EngineError && [429, 499, 503].includes(err.status)) throw err;
        failed = `the encoder ${encoder.name} failed (${(err as Error).message}); `;
        this.log.warn(`${failed}classifying by rules`);
      }
    }
    const r = classifyByRules(input.text);
    return { category: r.category, confidence: r.confidence, method: 'rules', reason: failed + r.reason };
  }
}
