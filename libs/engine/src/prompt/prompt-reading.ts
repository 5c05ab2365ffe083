import { InvalidRequestError } from '../core/errors';
import { CoreMessage, OutputConstraint, PromptInput } from '../core/generation-request';
import { LoadedModel } from '../models/loaded-model';
import { MediaTally, planMedia } from '../media/media-plan';
import { MAX_PICTURES } from '../media/media-thinning';
import { mediaSignal } from '../media/media-tools';
import { PromptMedia, readVisionPrompt } from '../media/vision-prompt';
import { renderPrompt, RenderedPrompt } from './prompt-renderer';

/** A prompt as the model reads it: its text, its tokens, the images among them, and what was thinned. */
export interface ReadPrompt {
  rendered: RenderedPrompt;
  tokens: Int32Array;
  media?: PromptMedia;
  /** Present when pictures were left out (svc_media). */
  tally?: MediaTally;
}

export interface ReadOptions {
  /** The local runner's `context`: tokens read before the prompt. */
  priorTokens?: number[];
  /** The prompt continues a named context, which holds text only. */
  session?: boolean;
  /** Tokens the answer may take: a prompt thinned to fit its context leaves this much room (up to a quarter of it). */
  maxTokens?: number;
  signal?: AbortSignal;
}

/**
 * Renders and tokenizes a prompt. A chat prompt's PDFs and videos are read first (media-plan);
 * its pictures are then thinned to the request's limits, and again, fewer, while they overflow
 * the positions a request holds, so a long video or many images answer rather than 400.
 */
export async function readPrompt(lm: LoadedModel, prompt: PromptInput, constraint: OutputConstraint, opts: ReadOptions): Promise<ReadPrompt> {
  if (prompt.kind !== 'chat' || !hasMedia(prompt.messages)) {
    const rendered = renderPrompt(lm.native, prompt, constraint, lm.vision);
    return { rendered, tokens: await promptTokens(lm, rendered.text, opts.priorTokens) };
  }
  // Every decode and fetch of this request's media, together, within MEDIA_BUDGET_MS.
  const signal = mediaSignal(opts.signal);
  const plan = await planMedia(prompt.messages, { vision: !!lm.projector, signal });
  let total = Math.min(plan.count, MAX_PICTURES);
  for (;;) {
    const sel = plan.select(total);
    const rendered = renderPrompt(lm.native, { ...prompt, messages: sel.messages }, constraint, lm.vision);
    if (!rendered.media?.length || !lm.projector) return { rendered, tokens: await promptTokens(lm, rendered.text, opts.priorTokens), tally: sel.tally };
    // A context is matched by its tokens, which cannot tell two pictures apart.
    if (opts.session) throw new InvalidRequestError('svc_session contexts hold text only: send images without svc_session');
    const read = await readVisionPrompt(lm.projector, priorText(lm, opts.priorTokens) + rendered.text, rendered.media, { signal, made: plan.made, numbers: plan.numbers, fetched: plan.fetched });
    const fewer = fewerPictures(lm, sel.kept, read, opts.maxTokens);
    if (fewer === undefined) return { rendered, ...read, tally: sel.tally };
    read.media.prompt.dispose();
    total = fewer;
  }
}

/**
 * How many pictures to try next when the prompt overflows a request's positions: enough fewer,
 * at the positions a picture took on average, to leave the answer its room. Undefined: it fits,
 * or there is nothing left to thin (the text alone is too long; the request's 400 says so).
 */
function fewerPictures(lm: LoadedModel, kept: number, read: { tokens: Int32Array; media: PromptMedia }, maxTokens = 512): number | undefined {
  const limit = lm.scheduler.nCtxSeq;
  if (read.tokens.length + 1 <= limit || kept === 0 || read.media.spans.length === 0) return undefined;
  const perPicture = read.media.spans.reduce((n, s) => n + s.length, 0) / read.media.spans.length;
  const room = Math.max(1, Math.min(maxTokens, Math.floor(limit / 4)));
  const drop = Math.max(1, Math.ceil((read.tokens.length + room - limit) / perPicture));
  return Math.max(0, kept - drop);
}

function hasMedia(messages: CoreMessage[]): boolean {
  return messages.some((m) => Array.isArray(m.content) && m.content.some((p) => p.type === 'media'));
}

/** Short prompts are tokenized on the spot (microseconds); long ones on the engine's thread, off the event loop. */
const SYNC_TOKENIZE_CHARS = 8192;
function tokenizePrompt(lm: LoadedModel, text: string): Promise<Int32Array> | Int32Array {
  return text.length <= SYNC_TOKENIZE_CHARS ? lm.native.tokenizeSync(text, true, true) : lm.native.tokenize(text, true, true);
}

/**
 * The prompt's tokens, after `prior` ones when given: read back as text in front of the prompt and
 * tokenized whole, as the local runner does, so a word split across the seam reads as one.
 */
async function promptTokens(lm: LoadedModel, text: string, prior: number[] | undefined): Promise<Int32Array> {
  if (!prior?.length) return tokenizePrompt(lm, text);
  return tokenizePrompt(lm, priorText(lm, prior) + text);
}

/** Earlier tokens (the local runner's `context`) as text to read before the prompt; '' for none. */
function priorText(lm: LoadedModel, prior: number[] | undefined): string {
  if (!prior?.length) return '';
  const nVocab = lm.native.info.nVocab;
  const bad = prior.find((t) => !Number.isInteger(t) || t < 0 || t >= nVocab);
  if (bad !== undefined) throw new InvalidRequestError(`context holds ${bad}, which is no token of ${lm.name} (0 to ${nVocab - 1})`);
  return asText(lm, Int32Array.from(prior));
}

/**
 * Tokens as text that tokenizes back to them: template markers written out (they parse back), a
 * leading BOS left for the tokenizer to add again; without it in front the first word kept the
 * space the tokenizer puts before it, and each round trip added one.
 */
export function asText(lm: LoadedModel, tokens: Int32Array): string {
  const bos = lm.native.info.bos;
  return lm.native.detokenize(bos >= 0 && tokens[0] === bos ? tokens.subarray(1) : tokens, true);
}
