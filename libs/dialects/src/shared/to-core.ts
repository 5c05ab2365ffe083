import { InvalidRequestError } from '../../../engine/src/core/errors';
import { CoreContentPart, CoreMessage, GenerationRequest, OutputConstraint, SamplingParams } from '../../../engine/src/core/generation-request';
import { joinTexts } from '../../../engine/src/prompt/text-parts';
import { SamplingFieldsDto } from './sampling.dto';

/** Pieces of the core request every dialect derives the same way. */

const ROLE = /^[A-Za-z0-9_.-]{1,64}$/;

export function checkMessages(messages: Array<{ role?: unknown }> | undefined): void {
  if (!messages || messages.length === 0) throw new InvalidRequestError('messages is empty');
  messages.forEach((m, i) => {
    if (typeof m?.role !== 'string' || !ROLE.test(m.role)) {
      throw new InvalidRequestError(
        `messages[${i}].role is not a role name. A role is letters, digits, underscore, hyphen, dot, up to 64 characters`,
      );
    }
  });
}

export function samplingFrom(d: SamplingFieldsDto): SamplingParams {
  const logitBias: Record<number, number> = {};
  for (const [k, v] of Object.entries(d.logit_bias ?? {})) {
    if (!/^\d+$/.test(k) || typeof v !== 'number') throw new InvalidRequestError(`cannot parse request: logit_bias.${k}: must map token ids to numbers`);
    logitBias[Number(k)] = v;
  }
  return {
    temperature: d.temperature,
    topP: d.top_p,
    topK: d.top_k,
    minP: d.min_p,
    typicalP: d.typical_p,
    seed: d.seed,
    presencePenalty: d.presence_penalty,
    frequencyPenalty: d.frequency_penalty,
    repeatPenalty: d.repeat_penalty,
    repeatLastN: d.repeat_last_n,
    logitBias: Object.keys(logitBias).length ? logitBias : undefined,
    dryMultiplier: d.svc_dry_multiplier,
    dryBase: d.svc_dry_base,
    dryAllowedLength: d.svc_dry_allowed_length,
    bannedTokens: d.svc_banned_tokens,
  };
}

/**
 * The prompt cache. llama-server's cache_prompt: false means this request starts
 * from nothing; like a llama-server slot, what it leaves in the KV cache is still
 * kept for later requests unless svc_retain_prefix is false.
 */
export function prefixCacheFrom(d: SamplingFieldsDto): Pick<GenerationRequest, 'retainPrefix' | 'reusePrefix'> {
  return { retainPrefix: d.svc_retain_prefix ?? true, reusePrefix: d.cache_prompt ?? true };
}

export function stopsFrom(stop: string | string[] | null | undefined): string[] {
  // null is "no stop", as in the OpenAI API.
  if (stop === undefined || stop === null) return [];
  return (Array.isArray(stop) ? stop : [stop]).filter((s) => s.length > 0);
}

/**
 * svc_schema wins over svc_grammar, svc_format and the dialect's own format
 * field. The lexicon combines with none of them (refused rather than guessed).
 */
export function constraintFrom(d: SamplingFieldsDto, dialectFormat: OutputConstraint, formatField = 'response_format'): OutputConstraint {
  if (d.svc_lexicon || d.svc_lexicon_strict) {
    const lexicon = d.svc_lexicon_strict ? 'svc_lexicon_strict' : 'svc_lexicon';
    const others = [
      d.svc_schema && 'svc_schema',
      d.svc_grammar != null && 'svc_grammar',
      d.grammar != null && 'grammar',
      d.svc_format != null && 'svc_format',
      dialectFormat.kind !== 'none' && formatField,
    ].filter((x): x is string => typeof x === 'string');
    if (others.length) throw new InvalidRequestError(`${lexicon} cannot be combined with ${others.join(', ')}: a request takes one output constraint`);
    return { kind: 'lexicon', strict: d.svc_lexicon_strict === true };
  }
  if (d.svc_schema) return { kind: 'json_schema', schema: d.svc_schema };
  const gbnf = d.svc_grammar ?? d.grammar;
  if (gbnf) return { kind: 'grammar', gbnf };
  if (d.svc_format != null) {
    if (d.svc_format !== 'json') throw new InvalidRequestError(`svc_format must be "json", got "${d.svc_format}"`);
    return { kind: 'json' };
  }
  return dialectFormat;
}

/**
 * A message's parts as the template reads them: text alone becomes one string, its parts joined
 * with a newline as llama.cpp joins text parts (glued, "…hi" + "what" read as "…hiwhat").
 */
export function contentOf(parts: CoreContentPart[]): string | CoreContentPart[] {
  return parts.every((p) => p.type === 'text') ? joinTexts(parts.map((p) => (p as { text: string }).text)) : parts;
}

export { joinTexts };

export type { CoreMessage };

/** An optional string field of a tool: null is absent; another type is a 400 naming the field. */
export function optionalText(v: unknown, field: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new InvalidRequestError(`cannot parse request: ${field} must be a string`);
  return v;
}

/** A tool's parameter schema: null is absent; anything but an object is a 400 naming the field. */
export function schemaOrAbsent(v: unknown, field: string): Record<string, unknown> | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw new InvalidRequestError(`cannot parse request: ${field} must be a JSON Schema object`);
  return v as Record<string, unknown>;
}
