import { NativeChatPrompt, NativeModel } from '../backend/native-addon';
import { InvalidRequestError } from '../core/errors';
import { CoreMessage, CoreTool, CoreToolCall, CoreToolChoice, OutputConstraint, PromptInput } from '../core/generation-request';
import { FALLBACK_CHAT_TEMPLATE } from './fallback-template';
import { schemaProblem } from '../constraints/schema-check';
import { inlineLocalRefs } from './schema-refs';
import { wellFormed } from './well-formed';
import { jsonToolCallParser, OutputParser, toolCallSchema, withToolSystemMessage } from './tool-fallback';

export interface RenderedPrompt {
  text: string;
  /** Set for chat prompts: llama.cpp's chat params (tool grammar, stops). */
  chat?: NativeChatPrompt;
  /** Set when the output is parsed (tool calls, a reasoning model's thoughts). */
  parser?: OutputParser;
  /** The parser's tool calls are answered as calls (the prompt offered tools). */
  parseCalls?: boolean;
  /** Sample with the chat params' own tool grammar, triggers and preserved tokens. */
  toolGrammar?: boolean;
  /** Replaces the request's constraint (the tool grammar or the forced-call schema rules). */
  constraint?: OutputConstraint;
  /** A call is forced from the first token: the whole output is call syntax, which no stop string is for. */
  callFromStart?: boolean;
  /** What opens a call under a lazy tool grammar: from there on the output is call syntax. */
  callMarker?: RegExp;
}

/** Turns a core prompt into model text through the model's own chat template. */
export function renderPrompt(model: NativeModel, prompt: PromptInput, constraint: OutputConstraint): RenderedPrompt {
  if (prompt.kind === 'text') return { text: prompt.text };
  if (prompt.kind === 'infill') return { text: infillText(model, prompt.prefix, prompt.suffix) };
  const media = prompt.messages.flatMap((m) => (Array.isArray(m.content) ? m.content.filter((p) => p.type === 'media') : []));
  if (media.length > 0) {
    // Vision needs a projector (mmproj) loaded beside the model; none is here.
    throw new InvalidRequestError(`this model has no vision projector; it cannot read ${media[0].kind} parts`);
  }
  if (prompt.plainWithoutTemplate && !model.info.chatTemplate) {
    // A base model: its prompt is continued, as a raw one (the system text has no place in it).
    const user = [...prompt.messages].reverse().find((m) => m.role === 'user');
    return { text: user ? textOnly(user).content as string : '' };
  }
  if (prompt.toolChoice === 'required' && !prompt.tools?.length) {
    // Nothing could be called: the reply came back as free text under a 200.
    throw new InvalidRequestError('a required tool call (tool_choice required or any) needs tools, and the request has none');
  }
  const tools = forcedTools(prompt.tools ?? [], prompt.toolChoice).map(withInlinedRefs);
  const useTools = tools.length > 0 && prompt.toolChoice !== 'none';
  const choice = useTools ? toolChoiceText(prompt.toolChoice) : undefined;
  if (useTools && constraint.kind === 'grammar') {
    // The tool grammar takes over sampling: a grammar of the caller's would be dropped unseen (llama-server refuses it too).
    throw new InvalidRequestError('svc_grammar (or grammar) cannot be combined with tools (unless tool_choice is none): a request takes one output constraint');
  }
  if (choice === 'required' && prompt.continueFinal) {
    // The reply would have to continue the prefilled text and be a call at once: llama.cpp's
    // call grammar then failed to build ("invalid grammar: std::exception") or the call was lost.
    throw new InvalidRequestError('a final assistant message (a prefill the reply continues) cannot be combined with a required tool call (tool_choice required, any or a named tool)');
  }
  const apply = (messages: CoreMessage[], withTools: boolean): NativeChatPrompt => {
    try {
      return model.applyChatTemplate({
        messages: wellFormed(messages.map(textOnly)),
        tools: withTools ? wellFormed(tools) : undefined,
        toolChoice: withTools ? choice : undefined,
        parallelToolCalls: prompt.parallelToolCalls ?? false,
        addGenerationPrompt: !prompt.continueFinal && (prompt.generationPrompt ?? true),
        continueFinalMessage: prompt.continueFinal ?? false,
        enableThinking: prompt.thinking,
        splitReasoning: prompt.splitReasoning,
        templateKwargs: prompt.templateKwargs,
        templateOverride: model.info.chatTemplate ? undefined : FALLBACK_CHAT_TEMPLATE,
        // The template's tool grammar takes over sampling: a JSON answer is one of its branches
        // (json_object / format "json" is the object schema, as engine.service samples it alone).
        // A required call has no answer branch: the format is for the text answer of a later turn.
        jsonSchema: !withTools || choice === 'required' ? undefined : constraint.kind === 'json_schema' ? JSON.stringify(constraint.schema) : constraint.kind === 'json' ? '{"type":"object"}' : undefined,
      });
    } catch (err) {
      throw new InvalidRequestError(`cannot render the chat template: ${(err as Error).message}`);
    }
  };
  const { chat, history } = withCallHistory(prompt.messages, (messages) => apply(messages, useTools));
  if (!useTools) return { text: chat.prompt, chat, parser: chat.supportsThinking ? withoutPrefill(withoutCalls(chat), prompt) : undefined };
  const templateHasTools = chat.supportsTools;
  const parser = withoutPrefill(prompt.parallelToolCalls ? chat : firstCallOnly(chat), prompt);
  const forced = choice === 'required';
  if (templateHasTools && chat.grammar) {
    return { text: chat.prompt, chat, parser, parseCalls: true, toolGrammar: true, constraint: { kind: 'none' }, callFromStart: forced && !chat.grammarLazy, callMarker: callMarker(chat) };
  }
  if (templateHasTools && !forced) return { text: chat.prompt, chat, parser, parseCalls: true, toolGrammar: true };
  // No tool-call format in the template (or no grammar for a required call):
  // describe the tools in the system message and read one JSON call back,
  // constrained to the tools' schemas when a call is required.
  const plain = apply(withToolSystemMessage(history, tools), false);
  return {
    text: plain.prompt,
    chat: plain,
    parser: jsonToolCallParser(tools.map((t) => t.function.name), choice === 'required'),
    parseCalls: true,
    constraint: forced ? { kind: 'json_schema', schema: toolCallSchema(tools) } : undefined,
    callFromStart: forced,
  };
}

/** The lazy tool grammar's triggers as one pattern (words literally, patterns as llama.cpp reads them). */
function callMarker(chat: NativeChatPrompt): RegExp | undefined {
  if (!chat.grammarLazy) return undefined;
  const parts = chat.callTriggers.flatMap((t) => {
    if (t.kind === 'word' || t.kind === 'token') return [t.value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')];
    return [t.kind === 'pattern_full' ? `^(?:${t.value})$` : t.value];
  });
  if (parts.length === 0) return undefined;
  try {
    return new RegExp(parts.map((p) => `(?:${p})`).join('|'));
  } catch {
    return undefined; // a pattern JavaScript reads otherwise: stop strings then apply throughout, as before
  }
}

/**
 * Without parallel_tool_calls the answer holds one call. The addon narrows the
 * common per-call grammar shape to one call; formats it does not recognise may
 * still allow several, so the parsed result keeps the first.
 */
function firstCallOnly(parser: OutputParser): OutputParser {
  return {
    parse(text, partial) {
      const out = parser.parse(text, partial);
      return out.toolCalls.length > 1 ? { ...out, toolCalls: out.toolCalls.slice(0, 1) } : out;
    },
  };
}

/**
 * A continued final message (prefill): llama.cpp's parser reads it back as content before the
 * output, as llama-server's is_continuation parse does. It is the client's own text and never
 * sent again, also while the parser still holds part of it back (a prefill "<tool" looks like
 * the start of a call tag until the output goes on).
 */
function withoutPrefill(parser: OutputParser, prompt: PromptInput): OutputParser {
  const last = prompt.kind === 'chat' && prompt.continueFinal ? prompt.messages[prompt.messages.length - 1] : undefined;
  const text = last ? (textOnly(last).content as string) : '';
  // A prefill may also be thoughts (a thinking block): the parser reads them back as reasoning.
  const thought = last?.reasoning_content ?? '';
  if (!text && !thought) return parser;
  return {
    parse(output, partial) {
      const out = parser.parse(output, partial);
      const content = withoutPrefix(out.content, text);
      const reasoning = out.reasoningContent && thought ? withoutPrefix(out.reasoningContent, thought) : out.reasoningContent;
      return content === out.content && reasoning === out.reasoningContent ? out : { ...out, content, reasoningContent: reasoning };
    },
  };
}

/** `text` less the client's own prefilled `prefix` (the parser may have trimmed its leading whitespace). */
function withoutPrefix(text: string, prefix: string): string {
  for (const f of [prefix, prefix.trimStart()]) {
    if (f === '') continue;
    if (text.startsWith(f)) return text.slice(f.length);
    if (f.startsWith(text)) return '';
  }
  return text;
}

/**
 * A reasoning template's output is parsed for its thoughts (llama.cpp's parser, also with
 * reasoning_format none, which puts an opened think tag back in front of the text); with no
 * tools offered nothing it reads is a call.
 */
function withoutCalls(parser: OutputParser): OutputParser {
  return {
    parse(text, partial) {
      const out = parser.parse(text, partial);
      return out.toolCalls.length ? { ...out, toolCalls: [] } : out;
    },
  };
}

/** A named tool choice: the template sees only that tool, so the call grammar can produce nothing else. */
function forcedTools(tools: CoreTool[], choice: CoreToolChoice | undefined): CoreTool[] {
  if (!choice || typeof choice !== 'object') return tools;
  const named = tools.filter((t) => t.function.name === choice.name);
  if (named.length === 0) throw new InvalidRequestError(`tool_choice names the function "${choice.name}", which is not among the tools`);
  return named;
}

function toolChoiceText(choice: CoreToolChoice | undefined): string {
  if (choice === undefined) return 'auto';
  // A named function is required; the schema-constrained call grammar then
  // produces a call (the template sees only the tools, filtered by the caller).
  return typeof choice === 'string' ? choice : 'required';
}

/**
 * llama.cpp resolves a tool's "#/$defs/..." against its own wrapper schema: inlined first. A
 * schema no call could satisfy is refused (schemaProblem).
 */
function withInlinedRefs(t: CoreTool): CoreTool {
  const params = t.function.parameters;
  if (!params) return t;
  const what = `tool "${t.function.name}" parameters`;
  const inlined = inlineLocalRefs(params, what);
  const problem = schemaProblem(inlined);
  if (problem) throw new InvalidRequestError(`${what}: ${problem}`);
  return inlined === params ? t : { ...t, function: { ...t.function, parameters: inlined } };
}

/**
 * A template with no tool format dropped earlier calls: the next turn never showed the model what
 * it had called. Such calls are written as the JSON call text the fallback asks for.
 */
function withCallHistory(messages: CoreMessage[], apply: (m: CoreMessage[]) => NativeChatPrompt): { chat: NativeChatPrompt; history: CoreMessage[] } {
  if (!messages.some((m) => m.tool_calls?.length)) return { chat: apply(messages), history: messages };
  const asText = callsAsText(messages);
  let chat: NativeChatPrompt;
  try {
    chat = apply(messages);
  } catch (err) {
    // Calls it could not render: a template without a tool format may still take them as text.
    const plain = apply(asText);
    if (plain.supportsTools) throw err;
    return { chat: plain, history: asText };
  }
  return chat.supportsTools ? { chat, history: messages } : { chat: apply(asText), history: asText };
}

/** Assistant calls as content, one {"name", "arguments"} object per line (the fallback's call format). */
function callsAsText(messages: CoreMessage[]): CoreMessage[] {
  return messages.map((m) => {
    if (!m.tool_calls?.length) return m;
    const calls = m.tool_calls.map((c) => JSON.stringify({ name: c.function.name, arguments: parsedOr(c.function.arguments) }));
    const text = textOnly(m).content as string;
    return { ...m, tool_calls: undefined, content: [text, ...calls].filter((t) => t !== '').join('\n') };
  });
}

function jsonArguments(c: CoreToolCall): CoreToolCall {
  const args = c.function.arguments;
  if (args.trim() === '') return { ...c, function: { ...c.function, arguments: '{}' } };
  return parsedOr(args) === args ? { ...c, function: { ...c.function, arguments: JSON.stringify(args) } } : c;
}

function parsedOr(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

/**
 * llama.cpp's template code reads string content or text parts, and call arguments as JSON: the
 * OpenAI API takes any string there (a model's broken call sent back), which was a 400. Such
 * arguments go in as a JSON string, empty ones as {}.
 */
function textOnly(m: CoreMessage): CoreMessage {
  if (m.tool_calls?.length) m = { ...m, tool_calls: m.tool_calls.map(jsonArguments) };
  if (!Array.isArray(m.content)) return { ...m, content: m.content ?? '' };
  return { ...m, content: m.content.map((p) => (p.type === 'text' ? p.text : '')).join('') };
}

/** Whether the vocabulary has the fill-in-the-middle markers a suffix needs (the local runner's "insert"). */
export function canInfill(model: NativeModel): boolean {
  const i = model.info;
  return i.fimPre >= 0 && i.fimSuf >= 0 && i.fimMid >= 0;
}

/**
 * Prefix-suffix-middle order, as llama-server's /infill and the local runner's code-model
 * templates build it: the model writes what goes between, after the middle marker.
 */
function infillText(model: NativeModel, prefix: string, suffix: string): string {
  if (!canInfill(model)) throw new InvalidRequestError('this model does not support insert (its vocabulary has no fill-in-the-middle tokens): send no suffix');
  const marker = (t: number) => model.tokenToPiece(t, true).toString('utf8');
  return `${marker(model.info.fimPre)}${prefix}${marker(model.info.fimSuf)}${suffix}${marker(model.info.fimMid)}`;
}
