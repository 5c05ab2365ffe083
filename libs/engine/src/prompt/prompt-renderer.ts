import { enforceableSchema } from '../constraints/schema-rewrite';
import { minifiedJson } from '../text/json-text';
import { NativeChatPrompt, NativeModel } from '../backend/native-addon';
import { joinTexts } from './text-parts';
import { InvalidRequestError } from '../core/errors';
import { CoreMessage, CoreTool, CoreToolCall, CoreToolChoice, OutputConstraint, PromptInput } from '../core/generation-request';
import { FALLBACK_CHAT_TEMPLATE } from './fallback-template';
import { schemaProblem } from '../constraints/schema-check';
import { inlineLocalRefs } from './schema-refs';
import { wellFormed } from './well-formed';
import { jsonToolCallParser, toolCallSchema, withToolSystemMessage } from './tool-fallback';
import { callMarker, firstCallOnly, OutputParser, thoughtsThen, thoughtTags, withoutCalls, withoutPrefill } from './output-parsers';
import { ThoughtTags } from '../text/call-watch';
import { CoreMediaPart } from '../media/media-bytes';
import { withMediaMarkers } from './media-markers';

export interface RenderedPrompt {
  text: string;
  /** Set for chat prompts: llama.cpp's chat params (tool grammar, stops). */
  chat?: NativeChatPrompt;
  /** Set when the output is parsed (tool calls, a reasoning model's thoughts). */
  parser?: OutputParser;
  /** The parser's tool calls are answered as calls (the prompt offered tools). */
  parseCalls?: boolean;
  /** Sample with the chat params' own grammar (tool calls, or thoughts then JSON), triggers and preserved tokens. */
  chatGrammar?: boolean;
  /** Replaces the request's constraint (the tool grammar or the forced-call schema rules). */
  constraint?: OutputConstraint;
  /** A call is forced from the first token: the whole output is call syntax, which no stop string is for. */
  callFromStart?: boolean;
  /** What opens a call under a lazy tool grammar: from there on the output is call syntax. */
  callMarker?: RegExp;
  /** A reasoning template's think block, where a call marker opens nothing. */
  thoughtTags?: ThoughtTags;
  /** The images the text's media markers stand for, in the order of the markers. */
  media?: CoreMediaPart[];
}

/** How a prompt's media parts are read: the loaded projector's marker, or none (a model without one). */
export interface MediaRendering {
  /** Where each image sits in the text given to the template (libmtmd's marker). */
  marker?: string;
  /** Why media cannot be read here, when a projector is loaded but this use takes text only. */
  refusal?: string;
}

/** Turns a core prompt into model text through the model's own chat template. */
export function renderPrompt(model: NativeModel, prompt: PromptInput, constraint: OutputConstraint, vision: MediaRendering = {}): RenderedPrompt {
  if (prompt.kind !== 'chat' || !vision.marker) return renderText(model, prompt, constraint, vision);
  // Images become markers in their messages' text (llama-server's way), read back by the projector.
  const { messages, media } = withMediaMarkers(prompt.messages, vision.marker);
  if (media.length === 0) return renderText(model, prompt, constraint, vision);
  return { ...renderText(model, { ...prompt, messages }, constraint, vision), media };
}

function renderText(model: NativeModel, prompt: PromptInput, constraint: OutputConstraint, vision: MediaRendering): RenderedPrompt {
  if (prompt.kind === 'text') return { text: prompt.text };
  if (prompt.kind === 'infill') return { text: infillText(model, prompt.prefix, prompt.suffix) };
  const media = prompt.messages.flatMap((m) => (Array.isArray(m.content) ? m.content.filter((p) => p.type === 'media') : []));
  if (media.length > 0) {
    // Vision needs a projector (mmproj) loaded beside the model; none is here.
    throw new InvalidRequestError(vision.refusal ?? `this model has no vision projector; it cannot read ${media[0].kind} parts`);
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
  // The grammar enforces the tools' schemas in the form llama.cpp follows (schema-rewrite.ts); the model reads them as sent.
  const enforced = tools.map(enforcedTool);
  const grammarTools = JSON.stringify(enforced) === JSON.stringify(tools) ? undefined : enforced;
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
  const apply = (messages: CoreMessage[], withTools: boolean, jsonSchema?: string): NativeChatPrompt => {
    try {
      return model.applyChatTemplate({
        messages: wellFormed(messages.map(textOnly)),
        tools: withTools ? wellFormed(tools) : undefined,
        toolChoice: withTools ? choice : undefined,
        grammarTools: withTools && grammarTools ? wellFormed(grammarTools) : undefined,
        parallelToolCalls: prompt.parallelToolCalls ?? false,
        addGenerationPrompt: !prompt.continueFinal && (prompt.generationPrompt ?? true),
        continueFinalMessage: prompt.continueFinal ?? false,
        enableThinking: prompt.thinking,
        splitReasoning: prompt.splitReasoning,
        templateKwargs: prompt.templateKwargs,
        templateOverride: model.info.chatTemplate ? undefined : FALLBACK_CHAT_TEMPLATE,
        jsonSchema,
      });
    } catch (err) {
      throw new InvalidRequestError(`cannot render the chat template: ${(err as Error).message}`);
    }
  };
  // The template's tool grammar takes over sampling: a JSON answer is one of its branches
  // (json_object / format "json" is the object schema, as engine.service samples it alone).
  // A required call has no answer branch: the format is for the text answer of a later turn.
  const answerSchema = schemaText(constraint);
  const { chat, history } = withCallHistory(prompt.messages, (messages) => apply(messages, useTools, useTools && choice !== 'required' ? answerSchema : undefined));
  const prefill = prefillOf(prompt);
  if (!useTools) {
    // A caller's grammar writes the answer from its first token: none of it is thoughts.
    if (!chat.supportsThinking || constraint.kind === 'grammar') return { text: chat.prompt, chat };
    // JSON from a reasoning model: llama.cpp's chat grammar lets it think first, then holds the answer to the schema.
    const thinking = answerSchema ? apply(history, false, answerSchema) : chat;
    if (answerSchema && !thinking.grammar) return { text: chat.prompt, chat };
    const parser = withoutPrefill(withoutCalls(thinking), prefill);
    return answerSchema
      ? { text: thinking.prompt, chat: thinking, parser, chatGrammar: true, constraint: { kind: 'none' }, thoughtTags: thoughtTags(thinking) }
      : { text: chat.prompt, chat, parser, thoughtTags: thoughtTags(chat) };
  }
  const templateHasTools = chat.supportsTools;
  const parser = withoutPrefill(prompt.parallelToolCalls ? chat : firstCallOnly(chat), prefill);
  const forced = choice === 'required';
  // Some tool-call formats (Qwen3.5's XML calls) get no grammar from llama.cpp for calls or a JSON
  // answer: an empty root, which failed later as "invalid grammar: failed to parse grammar".
  if (templateHasTools && answerSchema && !forced && chat.grammar !== undefined && /^root\s*::=\s*$/m.test(chat.grammar)) {
    throw new InvalidRequestError("this model's tool-call format cannot be combined with a JSON response format (response_format, format, svc_format or svc_schema) in one request: send the tools, or the format");
  }
  if (templateHasTools && chat.grammar) {
    return { text: chat.prompt, chat, parser, parseCalls: true, chatGrammar: true, constraint: { kind: 'none' }, callFromStart: forced && !chat.grammarLazy, callMarker: callMarker(chat), thoughtTags: thoughtTags(chat) };
  }
  if (templateHasTools && !forced) return { text: chat.prompt, chat, parser, parseCalls: true, chatGrammar: true, thoughtTags: thoughtTags(chat) };
  // No tool-call format in the template (or no grammar for a required call):
  // describe the tools in the system message and read one JSON call back,
  // constrained to the tools' schemas when a call is required.
  const described = withToolSystemMessage(history, tools);
  const calls = jsonToolCallParser(tools.map((t) => t.function.name), forced);
  const callSchema: OutputConstraint = { kind: 'json_schema', schema: toolCallSchema(enforced) };
  const plain = apply(described, false);
  if (plain.supportsThinking) {
    // A reasoning template: the thoughts come first, the call (or a JSON answer) after them, through
    // llama.cpp's chat grammar; the call is read from what follows the thoughts.
    const schema = forced ? schemaText(callSchema) : answerSchema;
    const thinking = schema ? apply(described, false, schema) : plain;
    if (!schema || thinking.grammar) {
      return { text: thinking.prompt, chat: thinking, parser: thoughtsThen(thinking, calls), parseCalls: true, callFromStart: forced, thoughtTags: thoughtTags(thinking), ...(schema ? { chatGrammar: true, constraint: { kind: 'none' } } : {}) };
    }
  }
  return { text: plain.prompt, chat: plain, parser: calls, parseCalls: true, constraint: forced ? callSchema : undefined, callFromStart: forced };
}

/** A JSON constraint as the schema text llama.cpp's chat params take (json_object is any object). */
function schemaText(c: OutputConstraint): string | undefined {
  return c.kind === 'json_schema' ? JSON.stringify(c.schema) : c.kind === 'json' ? '{"type":"object"}' : undefined;
}

/** What the client prefilled (a final assistant message continued): its text and its thoughts. */
export function prefillOf(prompt: Extract<PromptInput, { kind: 'chat' }>): { text: string; thought: string } {
  const last = prompt.continueFinal ? prompt.messages[prompt.messages.length - 1] : undefined;
  return { text: last ? (textOnly(last).content as string) : '', thought: last?.reasoning_content ?? '' };
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
  // A tool's patterns are often Python's (pydantic, MCP servers): not refused for JavaScript's syntax.
  const problem = schemaProblem(inlined, { ecmaPatterns: false });
  if (problem) throw new InvalidRequestError(`${what}: ${problem}`);
  return inlined === params ? t : { ...t, function: { ...t.function, parameters: inlined } };
}

/** A tool whose parameters are in the form llama.cpp's grammar enforces (schema-rewrite.ts). */
function enforcedTool(t: CoreTool): CoreTool {
  const params = t.function.parameters;
  return params ? { ...t, function: { ...t.function, parameters: enforceableSchema(params, false) as typeof params } } : t;
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
    // The arguments as the model wrote them (parsed, a 16-digit integer came back rounded).
    const calls = m.tool_calls.map((c) => {
      const args = c.function.arguments;
      return `{"name":${JSON.stringify(c.function.name)},"arguments":${parsedOr(args) === args ? JSON.stringify(args) : minifiedJson(args)}}`;
    });
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
  // Other parts have no text.
  return { ...m, content: joinTexts(m.content.flatMap((p) => (p.type === 'text' ? [p.text] : []))) };
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
