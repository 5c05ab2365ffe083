import { InvalidRequestError } from '../../../../engine/src/core/errors';
import {
  CoreContentPart,
  CoreMessage,
  CoreTool,
  CoreToolCall,
  GenerationRequest,
  OutputConstraint,
  PromptInput,
  RequestScope,
  SamplingParams,
} from '../../../../engine/src/core/generation-request';
import { checkMessages, optionalText, schemaOrAbsent, stopsFrom } from '../../shared/to-core';
import { ChatRequestDto, GenerateRequestDto, RunnerMessage, RunnerOptionsDto, RunnerToolCall } from '../protocol/local-runner.dto';

export const RUNNER_DEFAULT_NUM_PREDICT = 512;

/**
 * /api/generate → the core request. raw sends the prompt as is; otherwise it goes through the
 * chat template, and on a model without one it is sent as is too (the runner's `{{ .Prompt }}`).
 */
export function generateToCore(d: GenerateRequestDto, scope: RequestScope = {}): GenerationRequest {
  // A raw prompt is text with no place for media: refused rather than sent without them.
  if (d.raw && d.images?.length) throw new InvalidRequestError('images need the chat template: send them without raw');
  // As the local runner: raw sends the prompt as is, suffix unread.
  const infill = !d.raw && !!d.suffix;
  if (infill && d.images?.length) throw new InvalidRequestError('images have no place in a fill-in-the-middle prompt: send them without suffix');
  const prompt: PromptInput = d.raw
    ? { kind: 'text', text: d.prompt ?? '' }
    : infill
      ? { kind: 'infill', prefix: d.prompt ?? '', suffix: d.suffix! }
      : {
        kind: 'chat',
        messages: [
          ...(d.system ? [{ role: 'system', content: d.system }] : []),
          { role: 'user', content: withImages(d.prompt ?? '', d.images) },
        ],
        plainWithoutTemplate: true,
        ...thinkFrom(d.think),
      };
  // The local runner reads `context` before the templated prompt only; raw ignores it.
  return { ...base(d, prompt, scope), ...(!d.raw && d.context?.length ? { priorTokens: d.context } : {}) };
}

/** /api/chat → the core request. One tool call per turn, as the local-runner does. */
export function chatToCore(d: ChatRequestDto, scope: RequestScope = {}): GenerationRequest {
  checkMessages(d.messages as Array<{ role?: unknown }>);
  const tools = d.tools?.map(toCoreTool);
  const messages = toCoreMessages(d.messages);
  // A final assistant message with text is a prefill the reply continues, as the local runner's templates leave it open.
  const last = messages[messages.length - 1];
  const continueFinal = last?.role === 'assistant' && !last.tool_calls?.length && typeof last.content === 'string' && last.content !== '';
  return base(d, { kind: 'chat', messages, tools, parallelToolCalls: false, continueFinal, ...thinkFrom(d.think) }, scope);
}

const THINK_LEVELS = ['high', 'medium', 'low'];

/**
 * `think`: false asks a reasoning model not to think (the template's enable_thinking), true lets
 * it, a level also goes to the template as its reasoning_effort (gpt-oss reads it). Absent leaves
 * the model's default. Whatever it thinks comes back in `thinking`, apart from the content.
 */
function thinkFrom(think: unknown): Pick<Extract<PromptInput, { kind: 'chat' }>, 'thinking' | 'thinkingRequired' | 'templateKwargs'> {
  if (think === undefined || think === null) return {};
  if (typeof think === 'boolean') return think ? { thinking: true, thinkingRequired: true } : { thinking: false };
  if (typeof think === 'string' && THINK_LEVELS.includes(think)) return { thinking: true, thinkingRequired: true, templateKwargs: { reasoning_effort: think } };
  throw new InvalidRequestError(`think must be true, false, "high", "medium" or "low", got ${JSON.stringify(think)}`);
}

function base(d: GenerateRequestDto | ChatRequestDto, prompt: PromptInput, scope: RequestScope): GenerationRequest {
  const o = d.options ?? {};
  return {
    model: d.model ?? '',
    prompt,
    sampling: samplingFromOptions(o),
    // num_predict <= 0 means "no limit" in the local runner (it stops only when num_predict > 0 is reached):
    // until the context fills, where the engine stops anyway.
    maxTokens: o.num_predict === undefined || o.num_predict === null ? RUNNER_DEFAULT_NUM_PREDICT : o.num_predict <= 0 ? Number.MAX_SAFE_INTEGER : o.num_predict,
    stop: stopsFrom(o.stop),
    constraint: formatToConstraint(d.format),
    // top_logprobs alone asks for them too (it has no other meaning).
    logprobs: d.top_logprobs ? d.top_logprobs : d.logprobs ? -1 : 0,
    retainPrefix: true,
    // The one svc_ extension these routes read.
    session: d.svc_session,
    ...scope,
  };
}

export function samplingFromOptions(o: RunnerOptionsDto): SamplingParams {
  return {
    temperature: o.temperature,
    topP: o.top_p,
    topK: o.top_k,
    minP: o.min_p,
    typicalP: o.typical_p,
    seed: o.seed,
    repeatPenalty: o.repeat_penalty,
    repeatLastN: o.repeat_last_n,
    presencePenalty: o.presence_penalty,
    frequencyPenalty: o.frequency_penalty,
  };
}

/** `format`: "json" for any JSON, a schema object for that schema, "" or absent for free text. */
export function formatToConstraint(format: GenerateRequestDto['format']): OutputConstraint {
  if (format === undefined || format === null || format === '') return { kind: 'none' };
  if (format === 'json') return { kind: 'json' };
  if (typeof format === 'object') return { kind: 'json_schema', schema: format };
  throw new InvalidRequestError(`invalid format: "${format}"; send "json" or a JSON Schema object`);
}

/**
 * The local-runner's messages carry no call ids; chat templates that pair a
 * tool answer with its call get ids made up here, matched in order.
 */
function toCoreMessages(messages: RunnerMessage[]): CoreMessage[] {
  let pending: string[] = [];
  return messages.map((m, i) => {
    const role = m.role as string;
    if (m.content !== undefined && m.content !== null && typeof m.content !== 'string') {
      throw new InvalidRequestError(`cannot parse request: messages[${i}].content must be a string`);
    }
    if (m.images !== undefined && m.images !== null && (!Array.isArray(m.images) || !m.images.every((x) => typeof x === 'string'))) {
      throw new InvalidRequestError(`cannot parse request: messages[${i}].images must be an array of base64 strings`);
    }
    const out: CoreMessage = { role, content: withImages((m.content as string | undefined) ?? '', m.images as string[] | undefined) };
    if (typeof m.thinking === 'string' && m.thinking) out.reasoning_content = m.thinking;
    if (Array.isArray(m.tool_calls) && m.tool_calls.length) {
      out.tool_calls = m.tool_calls.map((c, j) => toCoreCall(c, i, j));
      pending = out.tool_calls.map((c) => c.id);
    }
    if (role === 'tool') {
      const id = pending.shift();
      if (id) out.tool_call_id = id;
      if (typeof m.tool_name === 'string') out.name = m.tool_name;
    }
    return out;
  });
}

function toCoreCall(c: RunnerToolCall, i: number, j: number): CoreToolCall {
  const fn = c?.function;
  if (!fn || typeof fn.name !== 'string') throw new InvalidRequestError(`cannot parse request: messages[${i}].tool_calls[${j}].function.name must be a string`);
  // Arguments are an object here; the core (and the templates) take a JSON string.
  const args = typeof fn.arguments === 'string' ? fn.arguments : JSON.stringify(fn.arguments ?? {});
  return { id: typeof c.id === 'string' && c.id ? c.id : `call_${i}_${j}`, type: 'function', function: { name: fn.name, arguments: args } };
}

/**
 * Images (base64, as the local-runner sends them) become media parts, before the message's text as
 * the local runner places them; the engine refuses them without a vision projector.
 */
function withImages(text: string, images: string[] | undefined): CoreMessage['content'] {
  if (!images?.length) return text;
  const parts: CoreContentPart[] = images.map((data) => ({ type: 'media', kind: 'image', data }));
  parts.push({ type: 'text', text });
  return parts;
}

function toCoreTool(t: Record<string, unknown> | null, i: number): CoreTool {
  const fn = t?.function as { name?: unknown; description?: unknown; parameters?: unknown } | null | undefined;
  // null is "absent" in every optional field, as clients send it.
  if (!t || typeof t !== 'object' || (t.type != null && t.type !== 'function') || !fn || typeof fn !== 'object' || typeof fn.name !== 'string') {
    throw new InvalidRequestError(`cannot parse request: tools[${i}] must be {type: "function", function: {name, parameters}}`);
  }
  return {
    type: 'function',
    function: { name: fn.name, description: optionalText(fn.description, `tools[${i}].function.description`), parameters: schemaOrAbsent(fn.parameters, `tools[${i}].function.parameters`) },
  };
}
