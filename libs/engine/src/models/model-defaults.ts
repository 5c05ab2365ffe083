import type { ModelDefaults } from '../../../store/src/model-defaults';
import type { GenerationRequest, PromptInput, SamplingParams } from '../core/generation-request';

/** The local runner's option names that set sampling, as a params layer writes them. */
const SAMPLING_OPTIONS: Array<[string, keyof SamplingParams]> = [
  ['temperature', 'temperature'],
  ['top_k', 'topK'],
  ['top_p', 'topP'],
  ['min_p', 'minP'],
  ['typical_p', 'typicalP'],
  ['seed', 'seed'],
  ['repeat_penalty', 'repeatPenalty'],
  ['repeat_last_n', 'repeatLastN'],
  ['presence_penalty', 'presencePenalty'],
  ['frequency_penalty', 'frequencyPenalty'],
];

const INTEGER_OPTIONS = new Set<keyof SamplingParams>(['seed', 'topK', 'repeatLastN']);

/**
 * A model's own defaults (its manifest's PARAMETER and SYSTEM) under what the request says, as
 * the local runner merges them, in every dialect: a sampling value the request leaves out comes
 * from the params; `stop` from the params when the request names none; the system prompt when
 * the conversation has no system turn. Other params (num_ctx, num_predict, mirostat...) are not
 * read: the server's flags and each dialect's defaults decide those.
 */
export function withModelDefaults(req: GenerationRequest, d: ModelDefaults): GenerationRequest {
  const o = d.options;
  let sampling = req.sampling;
  for (const [name, field] of SAMPLING_OPTIONS) {
    const v = o[name];
    // Values a model author could not have meant are skipped, not blamed on the request.
    if (sampling[field] !== undefined || typeof v !== 'number' || !Number.isFinite(v)) continue;
    if (INTEGER_OPTIONS.has(field) && !Number.isSafeInteger(v)) continue;
    sampling = { ...sampling, [field]: v };
  }
  const stops = Array.isArray(o.stop) ? o.stop.filter((s): s is string => typeof s === 'string' && s !== '') : [];
  const stop = req.stop.length === 0 && stops.length ? stops : req.stop;
  const prompt = withModelSystem(req.prompt, d);
  return sampling === req.sampling && stop === req.stop && prompt === req.prompt ? req : { ...req, sampling, stop, prompt };
}

/** The model's SYSTEM as the first turn of a conversation that has none (raw text is left as is). */
export function withModelSystem(prompt: PromptInput, d: ModelDefaults): PromptInput {
  // OpenAI's developer role is the system turn of newer clients: it replaces the model's SYSTEM too.
  if (!d.system || prompt.kind !== 'chat' || prompt.messages.some((m) => m.role === 'system' || m.role === 'developer')) return prompt;
  return { ...prompt, messages: [{ role: 'system', content: d.system }, ...prompt.messages] };
}
