import { CoreMessage, CoreTool } from '../core/generation-request';
import { OutputParser } from './output-parsers';

/**
 * Forced tool calls on a template that cannot express tools (llama.cpp then
 * gives no call grammar). The tools are described in a system message, the
 * output is constrained to one JSON call object, and that object is parsed
 * here. Chosen over refusing so a required call always yields a valid call.
 */
export function describeToolsMessage(tools: CoreTool[]): string {
  const list = tools.map((t) => JSON.stringify({ name: t.function.name, description: t.function.description ?? '', parameters: t.function.parameters ?? {} }));
  return [
    'You can call these functions:',
    ...list,
    'Answer with one JSON object {"name": <function name>, "arguments": <arguments object>} and nothing else.',
  ].join('\n');
}

/** Adds the tool description to the first system message, or as a new one. */
export function withToolSystemMessage(messages: CoreMessage[], tools: CoreTool[]): CoreMessage[] {
  const text = describeToolsMessage(tools);
  const first = messages[0];
  if (first?.role === 'system' && typeof first.content === 'string') {
    return [{ ...first, content: `${first.content}\n\n${text}` }, ...messages.slice(1)];
  }
  return [{ role: 'system', content: text }, ...messages];
}

/** JSON schema of one call to any of the tools. */
export function toolCallSchema(tools: CoreTool[]): Record<string, unknown> {
  const variants = tools.map((t) => ({
    type: 'object',
    properties: { name: { const: t.function.name }, arguments: t.function.parameters ?? { type: 'object' } },
    required: ['name', 'arguments'],
    additionalProperties: false,
  }));
  return variants.length === 1 ? variants[0] : { anyOf: variants };
}

/**
 * Reads a JSON call {"name", "arguments"} naming one of the tools. While the
 * text may still become a call (it opens with "{") nothing is released as
 * content; anything else streams as content. A call cut short (max_tokens, a
 * stop string) is dropped, as on the template path, never sent as text: under
 * a required call every answer is one, otherwise one that opened with "name".
 */
export function jsonToolCallParser(names: string[], required: boolean): OutputParser {
  return {
    parse(text, partial) {
      const mayBeCall = /^\s*(\{|$)/.test(text);
      if (partial) return { content: mayBeCall ? '' : text, toolCalls: [] };
      if (mayBeCall) {
        try {
          const v = JSON.parse(text) as { name?: unknown; arguments?: unknown };
          if (typeof v?.name === 'string' && names.includes(v.name)) {
            return { content: '', toolCalls: [{ id: '', name: v.name, arguments: JSON.stringify(v.arguments ?? {}) }] };
          }
        } catch {
          if (required || /^\s*\{\s*"name"\s*:/.test(text)) return { content: '', toolCalls: [] };
          /* not a call: the text is content */
        }
      }
      return { content: text, toolCalls: [] };
    },
  };
}
