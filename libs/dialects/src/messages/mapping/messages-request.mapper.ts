import { InvalidRequestError } from '../../../../engine/src/core/errors';
import {
  CoreContentPart,
  CoreMessage,
  CoreTool,
  CoreToolCall,
  CoreToolChoice,
  GenerationRequest,
  PromptInput,
  RequestScope,
} from '../../../../engine/src/core/generation-request';
import { checkMessages, constraintFrom, contentOf, joinTexts, optionalText, prefixCacheFrom, samplingFrom, schemaOrAbsent, stopsFrom } from '../../shared/to-core';
import { MessagesBlock, MessagesInputMessage, MessagesRequestDto, MessagesTool, MessagesToolChoice } from '../protocol/messages.dto';

export const MESSAGES_DEFAULT_MAX_TOKENS = 1024;

/** Messages DTO → the core request. Pure: no I/O, no engine. */
export function messagesRequestToCore(d: MessagesRequestDto, scope: RequestScope = {}): GenerationRequest {
  // Chosen over silently dropping it: a client that asks for logprobs would otherwise get none without knowing why.
  if (d.logprobs !== undefined && d.logprobs !== null && d.logprobs !== false) {
    throw new InvalidRequestError('logprobs is unsupported on /v1/messages; use /v1/chat/completions for log-probabilities');
  }
  return {
    model: d.model ?? '',
    prompt: messagesPromptToCore(d),
    sampling: samplingFrom(d),
    maxTokens: d.max_tokens ?? MESSAGES_DEFAULT_MAX_TOKENS,
    stop: stopsFrom(d.stop_sequences),
    constraint: constraintFrom(d, { kind: 'none' }),
    logprobs: 0,
    ...prefixCacheFrom(d),
    session: d.svc_session,
    ...scope,
  };
}

/** The prompt alone (also what count_tokens measures): system, messages, tools. */
export function messagesPromptToCore(d: Pick<MessagesRequestDto, 'system' | 'messages' | 'tools' | 'tool_choice' | 'thinking'>): PromptInput {
  checkMessages(d.messages as Array<{ role?: unknown }>);
  const messages: CoreMessage[] = [];
  // An empty system ("" or no blocks) is none: the template's default system prompt applies, as for /api/generate.
  const system = systemText(d.system);
  if (system) messages.push({ role: 'system', content: system });
  const last = d.messages[d.messages.length - 1];
  // A final assistant turn is a prefill the reply continues; an empty one asks for a plain reply
  // (the dialect allows it), so it is left out rather than rendered as an empty, closed turn.
  const prefill = last.role === 'assistant' && !isEmptyContent(last.content);
  const given = prefill || last.role !== 'assistant' ? d.messages : d.messages.slice(0, -1);
  given.forEach((m, i) => messages.push(...toCoreMessages(m, i)));
  let tools = d.tools?.map(toCoreTool);
  const choice = toolChoice(d.tool_choice, tools);
  // A forced tool: the template sees only that tool, so the call grammar can produce nothing else.
  if (choice && typeof choice === 'object') tools = tools?.filter((t) => t.function.name === choice.name);
  return {
    kind: 'chat',
    messages,
    tools,
    toolChoice: choice,
    // The dialect allows parallel calls unless the caller disables them.
    parallelToolCalls: tools?.length ? !(d.tool_choice?.disable_parallel_tool_use ?? false) : undefined,
    continueFinal: prefill,
    ...thinkingFrom(d.thinking),
  };
}

/**
 * Extended thinking → the template's enable_thinking; absent leaves the model's default. A
 * budget closes the think block after that many tokens of thought.
 */
function thinkingFrom(t: MessagesRequestDto['thinking']): { thinking?: boolean; thinkingBudget?: number } {
  if (t === undefined || t === null) return {};
  if (t.type === 'enabled' || t.type === 'adaptive') {
    if (t.budget_tokens === undefined || t.budget_tokens === null) return { thinking: true };
    if (!Number.isInteger(t.budget_tokens) || (t.budget_tokens as number) < 1) {
      throw new InvalidRequestError('thinking.budget_tokens must be a positive integer');
    }
    return { thinking: true, thinkingBudget: t.budget_tokens as number };
  }
  if (t.type === 'disabled') return { thinking: false };
  throw new InvalidRequestError(`thinking.type must be enabled, disabled or adaptive, got ${JSON.stringify(t.type)}`);
}

function isEmptyContent(content: unknown): boolean {
  return content === '' || (Array.isArray(content) && content.length === 0);
}

function systemText(system: MessagesRequestDto['system']): string | undefined {
  if (system === undefined || system === null) return undefined;
  if (typeof system === 'string') return system;
  return system
    .map((b, j) => {
      if (b?.type !== 'text' || typeof b.text !== 'string') throw new InvalidRequestError(`cannot parse request: system[${j}] must be a text block`);
      return b.text;
    })
    .join('\n');
}

/**
 * One dialect message → core messages. A user turn's tool_result blocks become
 * `tool` messages (the shape chat templates know), placed before the rest of the turn.
 */
function toCoreMessages(m: MessagesInputMessage, i: number): CoreMessage[] {
  const role = m.role as string;
  const content = m.content;
  if (typeof content === 'string') return [{ role, content }];
  if (!Array.isArray(content)) throw new InvalidRequestError(`cannot parse request: messages[${i}].content must be a string or an array of blocks`);
  const out: CoreMessage[] = [];
  const parts: CoreContentPart[] = [];
  const calls: CoreToolCall[] = [];
  let reasoning: string | undefined;
  content.forEach((b, j) => {
    const at = `messages[${i}].content[${j}]`;
    switch (b?.type) {
      case 'text':
        parts.push({ type: 'text', text: str(b.text, `${at}.text`) });
        break;
      case 'image':
      case 'document':
        parts.push(mediaPart(b, at));
        break;
      case 'tool_use':
        if (role !== 'assistant') throw new InvalidRequestError(`cannot parse request: ${at}: tool_use blocks belong to assistant messages`);
        calls.push({ id: str(b.id, `${at}.id`), type: 'function', function: { name: str(b.name, `${at}.name`), arguments: JSON.stringify(b.input ?? {}) } });
        break;
      case 'tool_result':
        out.push({ role: 'tool', tool_call_id: str(b.tool_use_id, `${at}.tool_use_id`), content: toolResultContent(b, at) });
        break;
      case 'thinking':
        // An answer may hold several thinking blocks (thoughts after text): all of them go back, in order.
        if (typeof b.thinking === 'string' && b.thinking) reasoning = (reasoning ?? '') + b.thinking;
        break;
      case 'redacted_thinking':
        break; // opaque to this server: nothing to show the model
      default:
        throw new InvalidRequestError(`cannot parse request: ${at}.type must be one of text, image, document, tool_use, tool_result`);
    }
  });
  if (parts.length || calls.length || out.length === 0) {
    const msg: CoreMessage = { role, content: contentOf(parts) };
    if (calls.length) msg.tool_calls = calls;
    if (reasoning !== undefined) msg.reasoning_content = reasoning;
    out.push(msg);
  }
  return out;
}

function toolResultContent(b: MessagesBlock, at: string): CoreMessage['content'] {
  const c = b.content;
  let parts: CoreContentPart[];
  if (c === undefined || c === null) parts = [];
  else if (typeof c === 'string') parts = [{ type: 'text', text: c }];
  else if (Array.isArray(c)) {
    parts = c.map((x: MessagesBlock, k: number) =>
      x?.type === 'text' ? { type: 'text' as const, text: str(x.text, `${at}.content[${k}].text`) } : mediaPart(x, `${at}.content[${k}]`),
    );
  } else throw new InvalidRequestError(`cannot parse request: ${at}.content must be a string or an array of blocks`);
  // Templates have no error flag for a tool message: say it in the text.
  if (b.is_error === true) parts.unshift({ type: 'text', text: 'Error:' });
  return contentOf(parts);
}

/** image and document blocks. A plain-text document is text any model can read; the rest are media parts. */
export function mediaPart(b: MessagesBlock | null, at: string): CoreContentPart {
  if (!b || typeof b !== 'object') throw new InvalidRequestError(`cannot parse request: ${at} must be a content block`);
  const src = b.source as { type?: unknown; media_type?: unknown; data?: unknown; url?: unknown; content?: unknown } | undefined;
  if (b.type !== 'image' && b.type !== 'document') throw new InvalidRequestError(`cannot parse request: ${at}.type must be text, image or document`);
  if (!src || typeof src !== 'object') throw new InvalidRequestError(`cannot parse request: ${at}.source is required`);
  if (b.type === 'document' && src.type === 'text') return { type: 'text', text: str(src.data, `${at}.source.data`) };
  if (b.type === 'document' && src.type === 'content' && Array.isArray(src.content)) {
    return { type: 'text', text: joinTexts((src.content as MessagesBlock[]).map((x) => (typeof x?.text === 'string' ? x.text : ''))) };
  }
  const kind = b.type === 'image' ? 'image' : 'file';
  const mime = typeof src.media_type === 'string' ? src.media_type : undefined;
  const named = typeof b.title === 'string' && b.title ? { name: b.title } : {};
  if (src.type === 'base64') return { type: 'media', kind, data: str(src.data, `${at}.source.data`), mime, ...named };
  if (src.type === 'url') return { type: 'media', kind, url: str(src.url, `${at}.source.url`), mime, ...named };
  throw new InvalidRequestError(`cannot parse request: ${at}.source.type must be base64 or url${b.type === 'document' ? ', text or content' : ''}`);
}

function toCoreTool(t: MessagesTool | null, i: number): CoreTool {
  if (!t || typeof t !== 'object') throw new InvalidRequestError(`cannot parse request: tools[${i}] must be an object with name and input_schema`);
  // null is "absent" in every optional field, as clients send it.
  if (t.type != null && t.type !== 'custom') {
    throw new InvalidRequestError(`tools[${i}] is a server-side tool (${t.type}); this server runs no server-side tools: send custom tools with name and input_schema`);
  }
  if (typeof t.name !== 'string' || t.name === '') throw new InvalidRequestError(`cannot parse request: tools[${i}].name must be a string`);
  const parameters = schemaOrAbsent(t.input_schema, `tools[${i}].input_schema`);
  return { type: 'function', function: { name: t.name, description: optionalText(t.description, `tools[${i}].description`), parameters } };
}

function toolChoice(tc: MessagesToolChoice | undefined, tools: CoreTool[] | undefined): CoreToolChoice | undefined {
  if (!tc || tc.type === undefined || tc.type === null) return undefined;
  switch (tc.type) {
    case 'auto':
      return 'auto';
    case 'any':
      return 'required';
    case 'none':
      return 'none';
    case 'tool': {
      if (typeof tc.name !== 'string') throw new InvalidRequestError('tool_choice.name must be a string when tool_choice.type is "tool"');
      if (!tools?.some((t) => t.function.name === tc.name)) throw new InvalidRequestError(`tool_choice names ${tc.name}, which is not in tools`);
      return { name: tc.name };
    }
    default:
      throw new InvalidRequestError(`tool_choice.type must be auto, any, tool or none, got "${tc.type}"`);
  }
}

function str(v: unknown, field: string): string {
  if (typeof v !== 'string') throw new InvalidRequestError(`cannot parse request: ${field} must be a string`);
  return v;
}
