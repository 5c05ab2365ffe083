import { InvalidRequestError } from '../../../../engine/src/core/errors';
import { CoreMessage, CoreTool, CoreToolCall, CoreToolChoice, GenerationRequest, OutputConstraint, RequestScope } from '../../../../engine/src/core/generation-request';
import { checkMessages, constraintFrom, optionalText, prefixCacheFrom, samplingFrom, schemaOrAbsent, stopsFrom } from '../../shared/to-core';
import { ChatCompletionRequestDto, ResponseFormat } from '../protocol/chat-completion.dto';
import { toCorePart } from './content-parts';
import { reasoningFrom } from '../../shared/reasoning';
import { CompletionRequestDto } from '../protocol/completion.dto';

export const CHAT_DEFAULT_MAX_TOKENS = 512;

/** Chat-completions DTO → the core request. Pure: no I/O, no engine. */
export function chatRequestToCore(d: ChatCompletionRequestDto, scope: RequestScope = {}): GenerationRequest {
  checkMessages(d.messages as Array<{ role?: unknown }>);
  checkN(d.n);
  if (d.logprobs && d.stream) throw new InvalidRequestError('logprobs is not supported with stream: true');
  return {
    model: d.model ?? '',
    prompt: {
      kind: 'chat',
      messages: d.messages.map(toCoreMessage),
      tools: d.tools?.map(toCoreTool),
      toolChoice: toolChoice(d.tool_choice),
      parallelToolCalls: d.parallel_tool_calls,
      ...reasoningFrom(d),
    },
    sampling: samplingFrom(d),
    maxTokens: d.max_completion_tokens ?? d.max_tokens ?? CHAT_DEFAULT_MAX_TOKENS,
    stop: stopsFrom(d.stop),
    constraint: constraintFrom(d, responseFormat(d.response_format)),
    logprobs: d.logprobs ? (d.top_logprobs && d.top_logprobs > 0 ? d.top_logprobs : -1) : 0,
    ...prefixCacheFrom(d),
    session: d.svc_session,
    ...scope,
  };
}

/** Completions DTO → the core request (raw prompt continuation). */
export function completionRequestToCore(d: CompletionRequestDto, scope: RequestScope = {}): GenerationRequest {
  checkN(d.n);
  // Refused rather than silently dropped: the streamed chunks carry no logprobs.
  // null is "off", as in the OpenAI API.
  const logprobs = d.logprobs ?? undefined;
  if (logprobs !== undefined && d.stream) throw new InvalidRequestError('logprobs is not supported with stream: true');
  const prompt = Array.isArray(d.prompt) ? d.prompt : [d.prompt];
  if (prompt.length !== 1) throw new InvalidRequestError('prompt must be one string; this server completes one prompt per request');
  // The prompt's own log-probabilities are not computed; an insertion has no one text to echo.
  if (d.echo && logprobs !== undefined) throw new InvalidRequestError('echo cannot be combined with logprobs: the prompt\'s log-probabilities are not computed');
  if (d.echo && d.suffix) throw new InvalidRequestError('echo cannot be combined with suffix');
  return {
    model: d.model ?? '',
    prompt: d.suffix ? { kind: 'infill', prefix: prompt[0], suffix: d.suffix } : { kind: 'text', text: prompt[0] },
    sampling: { ...samplingFrom(d), ignoreEos: d.ignore_eos },
    maxTokens: d.max_completion_tokens ?? d.max_tokens ?? CHAT_DEFAULT_MAX_TOKENS,
    stop: stopsFrom(d.stop),
    constraint: constraintFrom(d, responseFormat(d.response_format)),
    logprobs: logprobs !== undefined ? (logprobs > 0 ? logprobs : -1) : 0,
    ...prefixCacheFrom(d),
    session: d.svc_session,
    ...scope,
  };
}

function checkN(n: number | null | undefined): void {
  if (n !== undefined && n !== null && n !== 1) throw new InvalidRequestError(`n must be 1; this server returns one choice per request (got ${n})`);
}

function responseFormat(rf: ResponseFormat | undefined): OutputConstraint {
  if (!rf || rf.type === undefined || rf.type === 'text') return { kind: 'none' };
  if (rf.type === 'json_object') return { kind: 'json' };
  if (rf.type === 'json_schema') {
    const schema = rf.json_schema?.schema;
    if (!schema || typeof schema !== 'object' || Array.isArray(schema)) throw new InvalidRequestError('response_format.json_schema.schema must be a JSON Schema object');
    return { kind: 'json_schema', schema };
  }
  throw new InvalidRequestError(`response_format.type must be text, json_object or json_schema, got "${rf.type}"`);
}

/** One chat-completions message → the core's (also the shape /v1/contexts takes its messages in). */
export function toCoreMessage(m: Record<string, unknown>, i: number): CoreMessage {
  const content = m.content;
  if (content !== undefined && content !== null && typeof content !== 'string' && !Array.isArray(content)) {
    throw new InvalidRequestError(`cannot parse request: messages[${i}].content must be a string or an array of parts`);
  }
  const out: CoreMessage = { role: m.role as string, content: (content ?? '') as CoreMessage['content'] };
  if (Array.isArray(content)) out.content = content.map((p, j) => toCorePart(p, i, j));
  if (typeof m.name === 'string') out.name = m.name;
  if (Array.isArray(m.tool_calls)) out.tool_calls = m.tool_calls.map((c, j) => toCoreToolCall(c, `messages[${i}].tool_calls[${j}]`));
  if (typeof m.tool_call_id === 'string') out.tool_call_id = m.tool_call_id;
  // An earlier answer's thoughts, as llama-server takes them back (the template decides whether to show them).
  if (typeof m.reasoning_content === 'string' && m.reasoning_content) out.reasoning_content = m.reasoning_content;
  return out;
}

/**
 * An earlier answer's call, checked (it reaches the template). Arguments are the JSON text
 * OpenAI sends; an object is taken as that text (the local runner's and some clients' shape),
 * absent or null as no arguments (clients leave them out for tools without parameters).
 */
function toCoreToolCall(c: unknown, at: string): CoreToolCall {
  const call = c as { id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown } } | null;
  const fn = call && typeof call === 'object' ? call.function : undefined;
  if (!fn || typeof fn !== 'object' || typeof fn.name !== 'string' || (call!.type !== undefined && call!.type !== 'function')) {
    throw new InvalidRequestError(`cannot parse request: ${at} must be {id, type: "function", function: {name, arguments}}`);
  }
  const args = fn.arguments;
  let text: string;
  if (typeof args === 'string') text = args;
  else if (args === undefined || args === null) text = '';
  else if (typeof args === 'object' && !Array.isArray(args)) text = JSON.stringify(args);
  else throw new InvalidRequestError(`cannot parse request: ${at}.function.arguments must be a string of JSON`);
  if (call!.id !== undefined && call!.id !== null && typeof call!.id !== 'string') throw new InvalidRequestError(`cannot parse request: ${at}.id must be a string`);
  // An absent id stays absent (the template decides what it shows).
  return { id: call!.id as string, type: 'function', function: { name: fn.name, arguments: text } };
}

function toCoreTool(t: Record<string, unknown> | null, i: number): CoreTool {
  const fn = t?.function as { name?: unknown; description?: unknown; parameters?: unknown } | null | undefined;
  if (!t || typeof t !== 'object' || t.type !== 'function' || !fn || typeof fn !== 'object' || typeof fn.name !== 'string') {
    throw new InvalidRequestError(`cannot parse request: tools[${i}] must be {type: "function", function: {name, parameters}}`);
  }
  return {
    type: 'function',
    function: { name: fn.name, description: optionalText(fn.description, `tools[${i}].function.description`), parameters: schemaOrAbsent(fn.parameters, `tools[${i}].function.parameters`) },
  };
}

function toolChoice(tc: ChatCompletionRequestDto['tool_choice']): CoreToolChoice | undefined {
  if (tc === undefined || tc === null) return undefined;
  if (typeof tc === 'string') {
    if (tc === 'auto' || tc === 'none' || tc === 'required') return tc;
    throw new InvalidRequestError(`tool_choice must be auto, none, required or a named function, got "${tc}"`);
  }
  const name = tc.function?.name;
  if (typeof name !== 'string') throw new InvalidRequestError('tool_choice.function.name must be a string');
  return { name };
}
