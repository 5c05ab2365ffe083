import { InvalidRequestError } from '../../../../engine/src/core/errors';
import { CoreContentPart, CoreMessage } from '../../../../engine/src/core/generation-request';
import { ResponsesInputItem } from '../protocol/responses.dto';
import { contentOf, joinTexts } from '../../shared/to-core';

const ROLES = new Set(['user', 'assistant', 'system', 'developer']);

/**
 * `input` → core messages. Messages keep their role (developer reads as system,
 * as chat templates know it); function_call items join the assistant turn they
 * follow as tool_calls; function_call_output items become `tool` messages.
 */
export function inputToCore(input: string | ResponsesInputItem[]): CoreMessage[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  if (input.length === 0) throw new InvalidRequestError('input is empty');
  const out: CoreMessage[] = [];
  input.forEach((item, i) => {
    const at = `input[${i}]`;
    if (!item || typeof item !== 'object' || Array.isArray(item)) throw new InvalidRequestError(`cannot parse request: ${at} must be an object`);
    switch (item.type ?? 'message') {
      case 'message': {
        const msg = messageToCore(item, at);
        const answer = msg.role === 'assistant' ? openAnswer(out) : undefined;
        if (answer && typeof answer.content === 'string' && typeof msg.content === 'string') answer.content += msg.content;
        else out.push(msg);
        break;
      }
      case 'function_call': {
        const call = { id: str(item.call_id, `${at}.call_id`), type: 'function' as const, function: { name: str(item.name, `${at}.name`), arguments: str(item.arguments, `${at}.arguments`) } };
        const last = out[out.length - 1];
        if (last?.role === 'assistant') (last.tool_calls ??= []).push(call);
        else out.push({ role: 'assistant', content: '', tool_calls: [call] });
        break;
      }
      case 'function_call_output':
        out.push({ role: 'tool', tool_call_id: str(item.call_id, `${at}.call_id`), content: outputText(item.output, `${at}.output`) });
        break;
      case 'reasoning': {
        // An earlier answer's thoughts: they go with its turn (the template decides whether to show them).
        const text = Array.isArray(item.content) ? item.content.map((p) => (typeof (p as { text?: unknown })?.text === 'string' ? (p as { text: string }).text : '')).join('') : '';
        const answer = openAnswer(out);
        if (answer) answer.reasoning_content = (answer.reasoning_content ?? '') + text;
        else if (text) out.push({ role: 'assistant', content: '', reasoning_content: text });
        break;
      }
      default:
        throw new InvalidRequestError(`cannot parse request: ${at}.type must be message, function_call, function_call_output or reasoning, got ${JSON.stringify(item.type)}`);
    }
  });
  return out;
}

/**
 * The assistant turn an output item joins: one answer's items (thoughts, text, calls, in any
 * order) are one turn, as a previous_response_id chain carries them.
 */
function openAnswer(out: CoreMessage[]): CoreMessage | undefined {
  const last = out[out.length - 1];
  return last?.role === 'assistant' ? last : undefined;
}

function messageToCore(item: ResponsesInputItem, at: string): CoreMessage {
  if (typeof item.role !== 'string' || !ROLES.has(item.role)) {
    throw new InvalidRequestError(`cannot parse request: ${at}.role must be user, assistant, system or developer`);
  }
  const role = item.role === 'developer' ? 'system' : item.role;
  const c = item.content;
  if (typeof c === 'string') return { role, content: c };
  if (!Array.isArray(c)) throw new InvalidRequestError(`cannot parse request: ${at}.content must be a string or an array of parts`);
  const parts = c.map((p, j) => partToCore(p as Record<string, unknown>, `${at}.content[${j}]`));
  return { role, content: contentOf(parts) };
}

export function partToCore(p: Record<string, unknown>, at: string): CoreContentPart {
  switch (p?.type) {
    case 'input_text':
    case 'output_text':
      return { type: 'text', text: str(p.text, `${at}.text`) };
    case 'refusal':
      return { type: 'text', text: str(p.refusal, `${at}.refusal`) };
    case 'input_image': {
      // Media parts reach the engine, which refuses them for a model without a vision projector.
      if (typeof p.image_url !== 'string') throw new InvalidRequestError(`cannot parse request: ${at}.image_url must be a URL or data URL (file ids are not stored here)`);
      return { type: 'media', kind: 'image', url: p.image_url };
    }
    case 'input_file': {
      const data = typeof p.file_data === 'string' ? p.file_data : undefined;
      const url = typeof p.file_url === 'string' ? p.file_url : undefined;
      if (!data && !url) throw new InvalidRequestError(`cannot parse request: ${at} needs file_data or file_url (file ids are not stored here)`);
      const name = typeof p.filename === 'string' && p.filename ? p.filename : undefined;
      return { type: 'media', kind: 'file', data, url, ...(name ? { name } : {}) };
    }
    default:
      throw new InvalidRequestError(`cannot parse request: ${at}.type must be one of input_text, output_text, refusal, input_image, input_file`);
  }
}

/** A tool result: a string, or parts whose text is joined. */
function outputText(v: unknown, at: string): string {
  if (typeof v === 'string') return v;
  if (Array.isArray(v)) return joinTexts(v.map((p, j) => str((p as { text?: unknown })?.text, `${at}[${j}].text`)));
  throw new InvalidRequestError(`cannot parse request: ${at} must be a string or an array of text parts`);
}

function str(v: unknown, field: string): string {
  if (typeof v !== 'string') throw new InvalidRequestError(`cannot parse request: ${field} must be a string`);
  return v;
}
