import { InvalidRequestError } from '../../../../engine/src/core/errors';
import { ContextRef, CoreMessage, CoreTool, CoreToolChoice, GenerationRequest, OutputConstraint } from '../../../../engine/src/core/generation-request';
import { constraintFrom, optionalText, samplingFrom, schemaOrAbsent, stopsFrom } from '../../shared/to-core';
import { ResponsesRequestDto, ResponsesTextFormat, ResponsesTool } from '../protocol/responses.dto';
import { inputToCore } from './input-items.mapper';
import { reasoningFrom } from '../../shared/reasoning';

export const RESPONSES_DEFAULT_MAX_OUTPUT_TOKENS = 1024;

/** What a turn continues: the earlier conversation (instructions excluded) and its context. */
export interface PriorTurn {
  conversation: CoreMessage[];
  context?: ContextRef;
}

export interface MappedTurn {
  request: GenerationRequest;
  /** This turn's input as core messages (joins the conversation once answered). */
  input: CoreMessage[];
}

/**
 * Responses DTO (+ the turn it continues) → the core request. Pure: no I/O.
 * Instructions are this turn's only (as the Responses API defines them): a
 * system message ahead of the carried conversation.
 */
export function responsesRequestToCore(d: ResponsesRequestDto, prior: PriorTurn | undefined, owner: string, signal?: AbortSignal): MappedTurn {
  if (d.svc_session !== undefined) throw new InvalidRequestError('svc_session is not available on /v1/responses; continue a turn with previous_response_id');
  const input = inputToCore(d.input);
  const messages: CoreMessage[] = [];
  if (d.instructions) messages.push({ role: 'system', content: d.instructions });
  messages.push(...(prior?.conversation ?? []), ...input);
  refuseUnknownCallOutputs(messages);
  let tools = d.tools?.map(toCoreTool);
  const choice = toolChoice(d.tool_choice, tools);
  // A forced tool: the template sees only that tool, so the call grammar can produce nothing else.
  if (choice && typeof choice === 'object') tools = tools?.filter((t) => t.function.name === choice.name);
  return {
    input,
    request: {
      model: d.model ?? '',
      prompt: { kind: 'chat', messages, tools, toolChoice: choice, parallelToolCalls: d.parallel_tool_calls, ...reasoningFrom({ reasoning_effort: d.reasoning?.effort, reasoning_budget_tokens: d.reasoning_budget_tokens, thinking_budget_tokens: d.thinking_budget_tokens }, 'reasoning.effort') },
      sampling: samplingFrom(d),
      maxTokens: d.max_output_tokens ?? RESPONSES_DEFAULT_MAX_OUTPUT_TOKENS,
      stop: stopsFrom(d.stop),
      constraint: constraintFrom(d, textFormat(d.text?.format)),
      logprobs: logprobsOf(d),
      // The turn's own context holds its KV; the shared prefix cache would hold it twice.
      retainPrefix: false,
      keepContext: { from: prior?.context },
      owner,
      signal,
    },
  };
}

/** The core's logprobs: 0 none, -1 the sampled token's only, N that many alternatives too. */
function logprobsOf(d: ResponsesRequestDto): number {
  const top = d.top_logprobs ?? 0;
  return d.include?.includes('message.output_text.logprobs') || top > 0 ? top || -1 : 0;
}

function toCoreTool(t: ResponsesTool, i: number): CoreTool {
  if (!t || typeof t !== 'object') throw new InvalidRequestError(`cannot parse request: tools[${i}] must be an object`);
  if (t.type !== 'function') {
    throw new InvalidRequestError(`tools[${i}] is a hosted tool (${String(t.type)}); this server runs function tools only: {type: "function", name, parameters}`);
  }
  if (typeof t.name !== 'string' || t.name === '') throw new InvalidRequestError(`cannot parse request: tools[${i}].name must be a string`);
  const parameters = schemaOrAbsent(t.parameters, `tools[${i}].parameters`);
  return { type: 'function', function: { name: t.name, description: optionalText(t.description, `tools[${i}].description`), parameters } };
}

function toolChoice(tc: ResponsesRequestDto['tool_choice'], tools: CoreTool[] | undefined): CoreToolChoice | undefined {
  if (tc === undefined || tc === null) return undefined;
  if (typeof tc === 'string') {
    if (tc === 'auto' || tc === 'none' || tc === 'required') return tc;
    throw new InvalidRequestError(`tool_choice must be auto, none, required or {type: "function", name}, got "${tc}"`);
  }
  if (tc.type !== 'function' || typeof tc.name !== 'string') throw new InvalidRequestError('tool_choice must be auto, none, required or {type: "function", name}');
  if (!tools?.some((t) => t.function.name === tc.name)) throw new InvalidRequestError(`tool_choice names ${tc.name}, which is not in tools`);
  return { name: tc.name };
}

/** text.format, read as chat's response_format is. */
export function textFormat(f: ResponsesTextFormat | undefined): OutputConstraint {
  if (f === undefined || f === null) return { kind: 'none' };
  // A string or number ("json_object") was read as no format, and the answer echoed it as applied.
  if (typeof f !== 'object' || Array.isArray(f)) throw new InvalidRequestError('cannot parse request: text.format must be an object ({"type": "text" | "json_object" | "json_schema", …})');
  if (f.type === undefined || f.type === 'text') return { kind: 'none' };
  if (f.type === 'json_object') return { kind: 'json' };
  if (f.type === 'json_schema') {
    if (!f.schema || typeof f.schema !== 'object' || Array.isArray(f.schema)) throw new InvalidRequestError('text.format.schema must be a JSON Schema object');
    return { kind: 'json_schema', schema: f.schema };
  }
  throw new InvalidRequestError(`text.format.type must be text, json_object or json_schema, got "${f.type}"`);
}

/** A function_call_output answers a call made earlier in the conversation (this input or a turn it continues), as OpenAI checks. */
function refuseUnknownCallOutputs(messages: CoreMessage[]): void {
  const calls = new Set<string>();
  for (const m of messages) {
    for (const c of m.tool_calls ?? []) if (c.id) calls.add(c.id);
    if (m.role === 'tool' && m.tool_call_id !== undefined && !calls.has(m.tool_call_id)) {
      throw new InvalidRequestError(`No tool call found for function call output with call_id ${m.tool_call_id}.`);
    }
  }
}
