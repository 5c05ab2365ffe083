import { Inject, Injectable } from '@nestjs/common';
import { ClientGoneError, InvalidRequestError } from '../core/errors';
import { CoreMessage } from '../core/generation-request';
import { KvContext } from '../contexts/kv-context';
import { LoadedModel } from '../models/loaded-model';
import { AcquireOptions, ModelManager } from '../models/model-manager';
import { renderPrompt } from '../prompt/prompt-renderer';
import { SessionBinding } from '../scheduler/sequence';
import { letterTokens } from './letter-tokens';

/** One decision prompt: a chat whose answer's first token is scored over `options` (single letters). */
export interface ScoredPrompt {
  /** Names the prompt in refusals ("question X"). */
  label: string;
  messages: CoreMessage[];
  options: string[];
  /** Text in the messages that is data (the state): read as text, its special-token names too. */
  data?: string;
}

export interface ScoringRequest {
  /** '' = the default model. */
  model: string;
  /** Prompts that begin alike (the state) share that beginning: it is read once and forked. */
  prompts: ScoredPrompt[];
  /** keep_alive as the local runner's chat takes it; absent: the /v1 routes' rule. */
  keepAlive?: AcquireOptions['keepAlive'];
  owner: string;
  signal?: AbortSignal;
}

export interface ScoringResult {
  modelName: string;
  /** Per prompt, per option: the next-token probability, renormalised over the options. */
  probabilities: number[][];
  /** Per prompt: its tokens, template included. */
  promptTokens: number[];
  /** Positions actually decoded: the shared beginning once, then each prompt's rest. */
  evaluatedTokens: number;
}

/**
 * Next-token probabilities of answer letters (systemone's decisions). Prompts
 * are rendered with the model's chat template; their common beginning goes into
 * a hidden KV context once, which is forked (cells shared, nothing copied) for
 * each prompt, whose rest is decoded through the scheduler like any request.
 */
@Injectable()
export class NextTokenScorer {
  constructor(@Inject(ModelManager) private readonly models: ModelManager) {}

  async score(req: ScoringRequest): Promise<ScoringResult> {
    const { lm, name } = await this.models.acquireNamed(req.model, req.keepAlive !== undefined ? { keepAlive: req.keepAlive } : undefined);
    return lm.held(() => this.scoreOn(lm, name, req));
  }

  private async scoreOn(lm: LoadedModel, name: string, req: ScoringRequest): Promise<ScoringResult> {
    if (!lm.hasChatTemplate) throw new InvalidRequestError(`${name} has no chat template: decisions need a chat model`);
    const letters = letterTokens(lm.native);
    const scoreIds = req.prompts.map((p) => Int32Array.from(p.options.flatMap((o) => letterIds(letters, o, name))));
    // Off the event loop and one at a time, refusing the first that does not fit: every prompt
    // carries the state, and 64 of a megabyte tokenized on the loop held every route for seconds.
    const limit = lm.scheduler.nCtxSeq;
    const tokens: Int32Array[] = [];
    const specialIn = new Map<string, boolean>();
    for (const p of req.prompts) {
      const t = await this.tokenize(lm, p, specialIn);
      if (t.length + 1 > limit) throw new InvalidRequestError(`question "${p.label}" is ${t.length} tokens; ${name} holds ${limit} positions per request`);
      if (req.signal?.aborted) throw new ClientGoneError();
      tokens.push(t);
    }
    // One place in the queue bound for the whole decision, however many sequences it runs.
    const giveBack = lm.scheduler.reserve();
    try {
      return await this.scoreAll(lm, name, tokens, scoreIds, letters, req);
    } finally {
      giveBack();
    }
  }

  private async scoreAll(lm: LoadedModel, name: string, tokens: Int32Array[], scoreIds: Int32Array[], letters: Map<string, number[]>, req: ScoringRequest): Promise<ScoringResult> {
    const logprobs: Float32Array[] = new Array(req.prompts.length);
    let evaluated = 0;
    const shared = sharedPrefix(tokens);
    if (tokens.length > 1 && shared > 0) {
      // The state: read once into a hidden context, then one lazy fork per question.
      const parent = await lm.contexts.create(req.owner, tokens[0].subarray(0, shared), '', { hidden: true, signal: req.signal, reserved: true });
      evaluated += shared;
      try {
        const { children } = await lm.contexts.fork(parent, tokens.length);
        const live = new Set(children);
        try {
          await inTurns(tokens.length, lm.scheduler.concurrency, async (i) => {
            try {
              const binding = await lm.contexts.bind(children[i], tokens[i], `question "${req.prompts[i].label}"`);
              const r = await scoreOne(lm, tokens[i], scoreIds[i], req, binding);
              logprobs[i] = r.logprobs;
              evaluated += tokens[i].length - r.cached;
            } finally {
              // Each fork goes as soon as its question is answered: 64 finished forks would hold 64
              // sequences (and push other contexts out to disk) until the last one ran.
              live.delete(children[i]);
              await deleteQuietly(lm, children[i]);
            }
          });
        } finally {
          // Forks whose question never ran (a failure, a client gone): lazy, they hold no sequence.
          for (const c of live) await deleteQuietly(lm, c);
        }
      } finally {
        await deleteQuietly(lm, parent);
      }
    } else {
      await inTurns(tokens.length, lm.scheduler.concurrency, async (i) => {
        const r = await scoreOne(lm, tokens[i], scoreIds[i], req);
        logprobs[i] = r.logprobs;
        evaluated += tokens[i].length - r.cached;
      });
    }
    const probabilities = req.prompts.map((p, i) => optionProbabilities(p.options.map((o) => letters.get(o)!.length), logprobs[i]));
    return { modelName: name, probabilities, promptTokens: tokens.map((t) => t.length), evaluatedTokens: evaluated };
  }

  /** `specialIn`: whether a data text holds a special token's name (asked once a request: it may be a megabyte). */
  private async tokenize(lm: LoadedModel, p: ScoredPrompt, specialIn: Map<string, boolean>): Promise<Int32Array> {
    // thinking off: a reasoning template opens (and closes) its think block in the generation prompt,
    // so the next token is the answer's first.
    const rendered = renderPrompt(lm.native, { kind: 'chat', messages: p.messages, thinking: false }, { kind: 'none' });
    let text = rendered.text;
    // Some templates open it whatever enable_thinking says (DeepSeek-R1's `<think>\n`): the scored
    // token was the thoughts' first. Closed here, as llama.cpp closes it for such a template.
    const chat = rendered.chat;
    const start = chat?.thinkingStartTag.trim();
    const end = chat?.thinkingEndTags.find((t) => t.trim() !== '');
    if (start && end && text.trimEnd().endsWith(start)) text = `${text}${end}\n\n`;
    // The data is text: a special token's name written in it (`<|im_end|>`) would end the turn and
    // forge the next. Only then is it tokenized apart (apart, a piece's edges may tokenize otherwise).
    const at = p.data ? text.indexOf(p.data) : -1;
    if (at < 0 || !(await this.holdsSpecial(lm, p.data!, specialIn))) return lm.native.tokenize(text, true, true);
    // The line ends after it go with it: a tokenizer joins "}" or '"' to the newline that follows.
    let upTo = at + p.data!.length;
    while (text[upTo] === '\n' || text[upTo] === '\r') upTo++;
    const parts = await Promise.all([
      lm.native.tokenize(text.slice(0, at), true, true),
      lm.native.tokenize(text.slice(at, upTo), false, false),
      lm.native.tokenize(text.slice(upTo), false, true),
    ]);
    return Int32Array.from(parts.flatMap((t) => Array.from(t)));
  }

  private async holdsSpecial(lm: LoadedModel, data: string, seen: Map<string, boolean>): Promise<boolean> {
    let found = seen.get(data);
    if (found === undefined) {
      const [asText, parsed] = await Promise.all([lm.native.tokenize(data, false, false), lm.native.tokenize(data, false, true)]);
      found = asText.length !== parsed.length || asText.some((t, i) => t !== parsed[i]);
      seen.set(data, found);
    }
    return found;
  }
}

function letterIds(letters: Map<string, number[]>, option: string, model: string): number[] {
  const ids = letters.get(option);
  if (!ids?.length) throw new InvalidRequestError(`${model}'s vocabulary has no token for the answer letter ${option}`);
  return ids;
}

/** Runs one prompt to its first answer position (max_tokens 1) and returns its scored logprobs. */
async function scoreOne(lm: LoadedModel, tokens: Int32Array, scoreTokens: Int32Array, req: ScoringRequest, session?: SessionBinding): Promise<{ logprobs: Float32Array; cached: number }> {
  if (req.signal?.aborted) {
    session?.onRelease(session.held, false);
    throw new ClientGoneError();
  }
  let logprobs: Float32Array | undefined;
  let cached = 0;
  const sampler = lm.scheduler.sampler({ temperature: 0 });
  let events: AsyncIterable<unknown>;
  try {
    events = lm.scheduler.submit({
      modelName: lm.name,
      promptTokens: tokens,
      sampler,
      maxTokens: 1,
      stop: [],
      logprobs: 0,
      // A state asked about again starts from the prefix cache (a single question; forks use the context).
      retainPrefix: !session,
      cachePartition: req.owner,
      session,
      signal: req.signal,
      reserved: true,
      scoreTokens,
      onScored: (lp) => (logprobs = lp),
      onAdmitted: (n) => (cached = n),
    });
  } catch (err) {
    lm.scheduler.giveBackSampler(sampler);
    session?.onRelease(session.held, false);
    throw err;
  }
  for await (const _ of events) {
    // One token; what matters arrives through onScored.
  }
  if (!logprobs) throw req.signal?.aborted ? new ClientGoneError() : new Error('the engine returned no scores for a decision prompt');
  return { logprobs, cached };
}

/**
 * Each option's probability from its letter tokens' logprobs (laid out option
 * after option, `counts[k]` each): summed per option, then renormalised over
 * the options, in log space so nothing underflows.
 */
export function optionProbabilities(counts: number[], logprobs: Float32Array): number[] {
  const perOption: number[] = [];
  let at = 0;
  for (const n of counts) {
    perOption.push(logSumExp(Array.from(logprobs.subarray(at, at + n))));
    at += n;
  }
  const total = logSumExp(perOption);
  return perOption.map((l) => Math.exp(l - total));
}

function logSumExp(xs: number[]): number {
  const m = Math.max(...xs);
  if (m === -Infinity) return -Infinity;
  return m + Math.log(xs.reduce((s, x) => s + Math.exp(x - m), 0));
}

/**
 * Tokens every prompt begins with, short of the shortest prompt's last token:
 * each fork decodes at least one position, where its answer is scored.
 */
export function sharedPrefix(prompts: Int32Array[]): number {
  if (prompts.length === 0) return 0;
  let n = Math.min(...prompts.map((p) => p.length)) - 1;
  for (const p of prompts.slice(1)) {
    let k = 0;
    while (k < n && p[k] === prompts[0][k]) k++;
    n = k;
  }
  return Math.max(0, n);
}

/** Runs fn(0..n-1), at most `width` at once; the first failure is thrown once all started ones settled. */
async function inTurns(n: number, width: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown;
  const worker = async () => {
    while (failure === undefined && next < n) {
      const i = next++;
      try {
        await fn(i);
      } catch (err) {
        failure ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(width, n)) }, worker));
  if (failure !== undefined) throw failure;
}

/**
 * Hidden contexts go whatever happened (one still bound to a request goes when it ends); a failure
 * to delete one must not hide the request's own error.
 */
async function deleteQuietly(lm: LoadedModel, c: KvContext): Promise<void> {
  await lm.contexts.release(c).catch(() => undefined);
}
