import { NativeChatPrompt } from '../backend/native-addon';
import { ThoughtTags } from '../text/call-watch';

/**
 * Wrappers around llama.cpp's chat-output parser (and the JSON-call parser of templates without
 * a tool format): what a request's prompt adds to how its output is read.
 */

/** What the output pipeline needs to split generated text into reasoning, content and tool calls. */
export interface OutputParser {
  parse(text: string, partial: boolean): ParsedOutput;
}

export interface ParsedOutput {
  content: string;
  /** The model's thoughts (a reasoning template's think block), '' or absent when none. */
  reasoningContent?: string;
  toolCalls: Array<{ id: string; name: string; arguments: string }>;
}

/** The lazy tool grammar's triggers as one pattern (words literally, patterns as llama.cpp reads them). */
export function callMarker(chat: NativeChatPrompt): RegExp | undefined {
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

/** A reasoning template's think block: its tags, and whether the generation prompt opened it. */
export function thoughtTags(chat: NativeChatPrompt): ThoughtTags | undefined {
  const start = chat.thinkingStartTag;
  const ends = chat.thinkingEndTags.filter((e) => e !== '');
  if (!chat.supportsThinking || !start || ends.length === 0) return undefined;
  return { start, ends, openAtStart: chat.generationPrompt.trimEnd().endsWith(start.trim()) };
}

/**
 * Without parallel_tool_calls the answer holds one call. The addon narrows the
 * common per-call grammar shape to one call; formats it does not recognise may
 * still allow several, so the parsed result keeps the first.
 */
export function firstCallOnly(parser: OutputParser): OutputParser {
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
 * the start of a call tag until the output goes on). A prefill may also be thoughts (a thinking
 * block): the parser reads them back as reasoning.
 */
export function withoutPrefill(parser: OutputParser, prefill: { text: string; thought: string }): OutputParser {
  const { text, thought } = prefill;
  if (!text && !thought) return parser;
  return {
    parse(output, partial) {
      const out = parser.parse(output, partial);
      const content = withoutPrefix(out.content, text);
      // Prefilled text after the thoughts closed them in the prompt: what the parser reads as thoughts is all the client's.
      const reasoning = !out.reasoningContent || !thought ? out.reasoningContent : text ? '' : withoutPrefix(out.reasoningContent, thought);
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
export function withoutCalls(parser: OutputParser): OutputParser {
  return {
    parse(text, partial) {
      const out = parser.parse(text, partial);
      return out.toolCalls.length ? { ...out, toolCalls: [] } : out;
    },
  };
}


/**
 * A reasoning template whose calls are read by the JSON-call parser (no tool format of its own):
 * llama.cpp's parser takes the thoughts off first, the call is read from what follows them.
 */
export function thoughtsThen(chat: NativeChatPrompt, calls: OutputParser): OutputParser {
  return {
    parse(text, partial) {
      const split = chat.parse(text, partial);
      const out = calls.parse(split.content, partial);
      return { ...out, reasoningContent: split.reasoningContent };
    },
  };
}
