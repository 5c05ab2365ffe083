import { Inject, Injectable, OnApplicationShutdown, Optional } from '@nestjs/common';
import { NativeSamplerOptions } from './backend/native-addon';
import { describeGbnfProblem, invertedRepetition } from './constraints/gbnf-check';
import { enforceableSchema } from './constraints/schema-rewrite';
import { schemaProblem } from './constraints/schema-check';
import { Lexicon } from './constraints/lexicon';
import { InvalidRequestError, ServerShuttingDownError } from './core/errors';
import { GenerationEvent } from './core/generation-events';
import { ContextRef, GenerationRequest, OutputConstraint, PromptInput, SamplingParams } from './core/generation-request';
import { KvContext } from './contexts/kv-context';
import { LoadedModel } from './models/loaded-model';
import { SessionBinding } from './scheduler/sequence';
import { ModelManager } from './models/model-manager';
import { withModelDefaults, withModelSystem } from './models/model-defaults';
import { prefillOf, RenderedPrompt } from './prompt/prompt-renderer';
import { PromptMedia, textTokens } from './media/vision-prompt';
import { MediaTally } from './media/media-plan';
import { asText, readPrompt } from './prompt/prompt-reading';

/** The -lexicon word list, when the server loaded one. */
export const LEXICON = Symbol('LEXICON');

export interface GenerationHandle {
  model: LoadedModel;
  /** The name the request asked for, resolved (two names of one file share a load but answer to their own). */
  modelName: string;
  promptTokens: number;
  /** The prompt as read (priorTokens included) and `answer` after it, tokenized as one text: the local runner's `context`. */
  tokensWith(answer: string): Promise<number[]>;
  events: AsyncIterable<GenerationEvent>;
  /** Prompt tokens read from a cache (prefix cache, a context); known once the first event arrived. */
  cachedPromptTokens(): number;
  /** The context kept for the request (keepContext); it holds the whole turn once `done` arrives. */
  context?: ContextRef;
  /** Present when the prompt's pictures were thinned: the routes' `X-Svc-Media` and `svc_media`. */
  media?: MediaTally;
}

/**
 * The engine's front door for every dialect: resolve the model, render and
 * tokenize the prompt, build the sampler (constraints included) and queue the
 * request. Everything that can be refused is refused here, before a stream starts.
 */
@Injectable()
export class EngineService implements OnApplicationShutdown {
  constructor(
    @Inject(ModelManager) readonly models: ModelManager,
    @Optional() @Inject(LEXICON) private readonly lexicon?: Lexicon | null,
  ) {}

  async generate(asked: GenerationRequest): Promise<GenerationHandle> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.generateOnce(asked);
      } catch (err) {
        // The model was retired (its name deleted or repointed, or unloaded for memory) between
        // acquire and submit: ask for the name again, which loads what it names now or says 404.
        // Only a server that is really stopping answers "shutting down".
        if (!(err instanceof ServerShuttingDownError) || this.models.closing || attempt >= RETIRED_RETRIES) throw err;
      }
    }
  }

  private async generateOnce(asked: GenerationRequest): Promise<GenerationHandle> {
    const requested = enforceable(this.resolveLexicon(asked));
    const { lm, name: modelName, entry } = await this.models.acquireNamed(asked.model);
    return lm.held(async () => {
      // The requested name's manifest, not the loaded file's: two names of one file may differ here.
      const req = withModelDefaults(asked, this.models.catalog.defaults(entry));
      const { rendered, tokens, media, tally } = await readPrompt(lm, req.prompt, requested, { priorTokens: req.priorTokens, session: !!req.session, maxTokens: req.maxTokens, signal: req.signal });
      try {
        if (req.prompt.kind === 'chat' && req.prompt.thinkingRequired && !rendered.chat?.supportsThinking) throw new InvalidRequestError(`${modelName} does not support thinking`);
        return { ...(await this.submit(req, lm, modelName, rendered, requested, tokens, media)), media: tally };
      } catch (err) {
        media?.prompt.dispose();
        throw err;
      }
    });
  }

  private async submit(req: GenerationRequest, lm: LoadedModel, modelName: string, rendered: RenderedPrompt, requested: OutputConstraint, tokens: Int32Array, media: PromptMedia | undefined): Promise<GenerationHandle> {
    if (tokens.length === 0) throw new InvalidRequestError('the prompt is empty');
    const limit = lm.scheduler.nCtxSeq;
    if (tokens.length + 1 > limit) {
      throw new InvalidRequestError(`the prompt is ${tokens.length} tokens; ${lm.name} holds ${limit} positions per request`);
    }
    const constraint = rendered.constraint ?? requested;
    const inverted = constraint.kind === 'grammar' ? invertedRepetition(constraint.gbnf) : undefined;
    if (inverted) throw new InvalidRequestError(`invalid grammar: ${inverted}`);
    let sampler;
    try {
      sampler = lm.scheduler.sampler({
        ...samplerOptions(req.sampling, constraint),
        // The chat params carry the tool grammar and its triggers.
        chat: rendered.chatGrammar ? rendered.chat : undefined,
        ...thinkingBudget(req.prompt, rendered, constraint),
      });
    } catch (err) {
      // llama.cpp feeds a prefill to a call-or-JSON grammar that is not lazy (tools with a JSON
      // format): one that cannot begin that JSON failed as "std::exception".
      const prefilled = rendered.chatGrammar && req.prompt.kind === 'chat' && req.prompt.continueFinal;
      throw new InvalidRequestError(prefilled ? PREFILL_NOT_JSON : samplerError(err as Error, constraint));
    }
    let kept: KvContext | undefined;
    let session: SessionBinding | undefined;
    try {
      if (req.session) {
        const turnStart = answerTurnStart(lm, req.prompt, rendered, tokens);
        session = await lm.contexts.bind(await lm.contexts.session(req.session, req.owner ?? ''), tokens, `svc_session ${req.session}`, { turnStart });
      } else if (req.keepContext && !media) ({ kept, session } = await this.bindKept(lm, req.keepContext.from, req.owner ?? '', tokens));
    } catch (err) {
      lm.scheduler.giveBackSampler(sampler);
      throw err;
    }
    let events: AsyncIterable<GenerationEvent>;
    let cached = 0;
    try {
      events = lm.scheduler.submit({
        modelName,
        promptTokens: tokens,
        sampler,
        maxTokens: req.maxTokens,
        // A forced call is call syntax from its first token: a stop string ("\n") would only cut it.
        stop: [...(rendered.callFromStart ? [] : req.stop), ...(rendered.chat?.additionalStops ?? [])],
        callMarker: rendered.callMarker,
        thoughtTags: rendered.thoughtTags,
        stopsInThoughts: req.prompt.kind === 'chat' && req.prompt.splitReasoning === false,
        callStops: rendered.chat?.additionalStops,
        logprobs: req.logprobs,
        retainPrefix: req.retainPrefix && !media,
        reusePrefix: req.reusePrefix !== false && !media,
        media,
        // Callers and markings do not share retained prompts: cached_tokens would tell one what another sent.
        cachePartition: req.owner ?? '',
        parser: rendered.parser,
        parseCalls: rendered.parseCalls,
        shownSpecial: rendered.chat?.preservedTokens,
        ignoreEos: req.sampling.ignoreEos,
        session,
        signal: req.signal,
        onAdmitted: (n) => (cached = n),
      });
    } catch (err) {
      lm.scheduler.giveBackSampler(sampler);
      session?.onRelease(session.held, false);
      if (kept) await lm.contexts.delete(kept);
      throw err;
    }
    return { model: lm, modelName, promptTokens: tokens.length, tokensWith: async (answer) => [...(await lm.native.tokenize(asText(lm, textTokens(tokens)) + answer, true, true))], events, cachedPromptTokens: () => cached, context: kept ? { weights: lm.entry.path, id: kept.id } : undefined };
  }

  /** Frees a context kept for a request (keepContext), also of a model not loaded now. */
  async dropContext(ref: ContextRef, owner: string): Promise<void> {
    await this.models.releaseContext(ref.weights, ref.id, owner);
  }

  /** A fork of `from` (cells shared, nothing copied) or a new hidden context, bound to the prompt. */
  private async bindKept(lm: LoadedModel, from: ContextRef | undefined, owner: string, tokens: Int32Array): Promise<{ kept: KvContext; session: SessionBinding }> {
    const parent = from && from.weights === lm.entry.path ? lm.contexts.get(from.id, owner, true) : undefined;
    const kept = parent ? (await lm.contexts.fork(parent, 1)).children[0] : await lm.contexts.create(owner, undefined, '', { hidden: true });
    try {
      return { kept, session: await lm.contexts.bind(kept, tokens, kept.id, { dropDivergent: true }) };
    } catch (err) {
      await lm.contexts.delete(kept);
      throw err;
    }
  }

  /** Tokens of a prompt as the model would read it (template included). */
  /**
   * Tokens of a prompt as a generation with `maxTokens` would read it: images count the positions
   * they take, PDFs their text, and pictures are thinned the same way (`media` says when).
   */
  async countTokens(model: string, prompt: PromptInput, opts: { maxTokens?: number; signal?: AbortSignal } = {}): Promise<{ model: LoadedModel; tokens: number; media?: MediaTally }> {
    const { lm, entry } = await this.models.acquireNamed(model);
    // Held like a generation's: a slow image fetch let keep_alive unload the projector under it.
    return lm.held(async () => {
      const { tokens, media, tally } = await readPrompt(lm, withModelSystem(prompt, this.models.catalog.defaults(entry)), { kind: 'none' }, opts);
      media?.prompt.dispose();
      return { model: lm, tokens: tokens.length, media: tally };
    });
  }

  async onApplicationShutdown(): Promise<void> {
    await this.models.close();
  }

  /** svc_lexicon becomes the word list's grammar; refused where it cannot apply. */
  private resolveLexicon(req: GenerationRequest): OutputConstraint {
    const c = req.constraint;
    if (c.kind !== 'lexicon') return c;
    if (!this.lexicon) throw new InvalidRequestError('svc_lexicon needs a word list: start the server with -lexicon <file>');
    const p = req.prompt;
    // A tool call has its own grammar; the two cannot both hold.
    if (p.kind === 'chat' && (p.tools?.length ?? 0) > 0 && p.toolChoice !== 'none') {
      throw new InvalidRequestError('svc_lexicon cannot be combined with tools (unless tool_choice is none): a request takes one output constraint');
    }
    return { kind: 'grammar', gbnf: c.strict ? this.lexicon.strictGrammar : this.lexicon.grammar };
  }

}

/**
 * Where this request's answer (the model's own text) begins in the prompt: a later prompt reads
 * it again through the template, which may render it unlike the tokens sampled (thoughts left
 * out, calls in its own format, its first characters joined to the turn's header or to a
 * prefill), so a session may depart from what it holds from there on.
 */
function answerTurnStart(lm: LoadedModel, p: PromptInput, rendered: RenderedPrompt, tokens: Int32Array): number {
  // Raw text: the prompt's last token may join the answer's first when the text is read again.
  if (!rendered.chat) return Math.max(0, tokens.length - 1);
  let own = lm.native.tokenizeSync(rendered.chat.generationPrompt, false, true).length;
  if (p.kind === 'chat' && p.continueFinal) {
    const prefill = prefillOf(p);
    own += lm.native.tokenizeSync(prefill.thought + prefill.text, false, true).length;
  }
  return Math.max(0, tokens.length - own);
}

/**
 * A caller's JSON schema in the form llama.cpp's converter enforces (schema-rewrite.ts), checked
 * first as written: a pattern JavaScript cannot read is named as the caller wrote it. (The tools'
 * schemas, and the call schema made of them, are checked where the prompt renders them.)
 */
function enforceable(c: OutputConstraint): OutputConstraint {
  if (c.kind !== 'json_schema') return c;
  const problem = schemaProblem(c.schema);
  if (problem) throw new InvalidRequestError(`invalid JSON schema: ${problem}`);
  try {
    return { ...c, schema: enforceableSchema(c.schema, true) };
  } catch (err) {
    throw err instanceof InvalidRequestError ? new InvalidRequestError(`invalid JSON schema: ${err.message}`) : err;
  }
}

/** A budget for the thoughts of a template with a think block (none for other prompts: nothing to close). */
function thinkingBudget(p: PromptInput, rendered: RenderedPrompt, constraint: OutputConstraint): Pick<NativeSamplerOptions, 'thinkingOf' | 'thinkingBudget'> {
  if (p.kind !== 'chat' || p.thinkingBudget === undefined || !rendered.chat?.supportsThinking) return {};
  // A caller's grammar holds the whole output from its first token: no think block in it to close.
  if (constraint.kind !== 'none') throw new InvalidRequestError('a thinking budget cannot be combined with svc_grammar, grammar or svc_lexicon: that grammar writes the whole answer, with no think block to close');
  return { thinkingOf: rendered.chat, thinkingBudget: p.thinkingBudget };
}

/** Tries of one request on models retired under it before the refusal stands (each retry re-resolves the name). */
const RETIRED_RETRIES = 3;

/** llama.cpp says only "failed to parse grammar": name the problem for a caller's own grammar. */
const PREFILL_NOT_JSON =
  'the final assistant message (a prefill) cannot begin this answer: with tools and a JSON format the reply is a tool call or JSON from its first character, prefill included; send no prefill, or one that starts the JSON';

function samplerError(err: Error, c: OutputConstraint): string {
  const problem = c.kind === 'grammar' && /parse grammar/.test(err.message) ? describeGbnfProblem(c.gbnf) : undefined;
  return problem ? `invalid grammar: ${problem}` : err.message;
}

/**
 * llama.cpp's seed is 32 bits, and 2^32 - 1 (LLAMA_DEFAULT_SEED) means a random one: -1 asks for
 * that, as in llama-server and the local runner. Any other integer seeds reproducibly, folded
 * into the 2^32 - 1 values that are not random (4294967295 was random, 1e20 undefined).
 */
function nativeSeed(seed: number | null | undefined): number | undefined {
  if (seed == null || seed === -1) return undefined;
  if (!Number.isSafeInteger(seed) || seed < -1) throw new InvalidRequestError(`seed must be -1 (random) or an integer from 0 to ${Number.MAX_SAFE_INTEGER}`);
  return seed % 0xffffffff;
}

/** Maps core sampling parameters and constraints onto llama.cpp's sampler options. */
export function samplerOptions(s: SamplingParams, c: OutputConstraint): NativeSamplerOptions {
  const bias: Array<[number, number]> = [];
  for (const [tok, b] of Object.entries(s.logitBias ?? {})) bias.push([Number(tok), b <= -100 ? -Infinity : b]);
  for (const t of s.bannedTokens ?? []) bias.push([t, -Infinity]);
  const o: NativeSamplerOptions = {
    temperature: s.temperature,
    topK: s.topK,
    topP: s.topP,
    minP: s.minP,
    typicalP: s.typicalP,
    seed: nativeSeed(s.seed),
    repeatPenalty: s.repeatPenalty,
    repeatLastN: s.repeatLastN,
    frequencyPenalty: s.frequencyPenalty,
    presencePenalty: s.presencePenalty,
    dryMultiplier: s.dryMultiplier,
    dryBase: s.dryBase,
    dryAllowedLength: s.dryAllowedLength,
    logitBias: bias.length ? bias : undefined,
    ignoreEos: s.ignoreEos,
  };
  if (c.kind === 'json') o.jsonSchema = '{"type":"object"}';
  else if (c.kind === 'json_schema') o.jsonSchema = JSON.stringify(c.schema);
  else if (c.kind === 'grammar') o.grammar = c.gbnf;
  else if (c.kind === 'lexicon') throw new InvalidRequestError('svc_lexicon reached the sampler unresolved');
  for (const k of Object.keys(o) as Array<keyof NativeSamplerOptions>) if (o[k] === undefined) delete o[k];
  return o;
}
