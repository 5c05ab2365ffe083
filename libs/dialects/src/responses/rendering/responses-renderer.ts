import { GenerationEvent, ToolCallEvent, Usage } from '../../../../engine/src/core/generation-events';
import { StreamWriter } from '../../../../http/src/sse';
import { collect, DoneEvent, newId } from '../../shared/collect';
import { primed } from '../../shared/primed';
import { WireFunctionCallItem, WireMessageItem, WireOutputItem, WireOutputText, WireResponse, WireResponseUsage } from '../protocol/wire-types';

/** Called with the finished response before the client hears of it (so a chained turn finds it stored). */
export type OnFinal = (r: WireResponse) => Promise<void>;

/**
 * Renders the core event stream as a Responses object, or as the public
 * Responses event sequence: response.created, response.in_progress, then per
 * output item output_item.added … output_item.done (text: content_part and
 * output_text events; tool calls: function_call_arguments events), then
 * response.completed (or response.incomplete), then `data: [DONE]`.
 */
export class ResponsesRenderer {
  private sequence = 0;
  private readonly messageId = newId('msg_');

  constructor(
    /** The response as it stands before generation (status in_progress, no output). */
    private readonly base: WireResponse,
    private readonly onFinal: OnFinal,
  ) {}

  async complete(events: AsyncIterable<GenerationEvent>): Promise<WireResponse> {
    const c = await collect(events);
    const final = this.finish(c.text, c.toolCalls, c.done);
    await this.onFinal(final);
    return final;
  }

  async stream(source: AsyncIterable<GenerationEvent>, out: StreamWriter): Promise<void> {
    const events = await primed(source);
    const send = (type: string, body: Record<string, unknown>) => out.event({ type, sequence_number: this.sequence++, ...body }, type);
    send('response.created', { response: this.base });
    send('response.in_progress', { response: this.base });
    const msg = { item_id: this.messageId, output_index: 0, content_index: 0 };
    let opened = false;
    const open = () => {
      opened = true;
      send('response.output_item.added', { output_index: 0, item: { ...this.message('', 'in_progress'), content: [] } });
      send('response.content_part.added', { ...msg, part: textPart('') });
    };
    let text = '';
    const calls: ToolCallEvent[] = [];
    let done: DoneEvent | undefined;
    for await (const ev of events) {
      if (out.closed) break;
      if (ev.type === 'delta') {
        if (!ev.text) continue;
        if (!opened) open();
        text += ev.text;
        send('response.output_text.delta', { ...msg, delta: ev.text, logprobs: [] });
      } else if (ev.type === 'tool_calls') calls.push(...ev.calls);
      else done = ev;
    }
    // A client gone or a cancelled generation: nothing to finish (the connection ends without [DONE]).
    if (!done || out.closed) return out.end();
    const final = this.finish(text, calls, done);
    final.output.forEach((item, i) => {
      if (item.type === 'message') {
        if (!opened) open();
        send('response.output_text.done', { ...msg, text: item.content[0].text, logprobs: [] });
        send('response.content_part.done', { ...msg, part: item.content[0] });
      } else {
        const at = { item_id: item.id, output_index: i };
        send('response.output_item.added', { output_index: i, item: { ...item, arguments: '', status: 'in_progress' } });
        send('response.function_call_arguments.delta', { ...at, delta: item.arguments });
        send('response.function_call_arguments.done', { ...at, name: item.name, arguments: item.arguments });
      }
      send('response.output_item.done', { output_index: i, item });
    });
    await this.onFinal(final);
    send(final.status === 'completed' ? 'response.completed' : 'response.incomplete', { response: final });
    out.event('[DONE]');
    out.end();
  }

  /** The finished response: a message item unless the turn is only tool calls, then one item per call. */
  private finish(text: string, calls: ToolCallEvent[], done: DoneEvent): WireResponse {
    const incomplete = done.finishReason === 'length';
    const output: WireOutputItem[] = [];
    if (text !== '' || calls.length === 0) output.push(this.message(text, incomplete ? 'incomplete' : 'completed'));
    for (const c of calls) output.push(functionCall(c));
    return {
      ...this.base,
      status: incomplete ? 'incomplete' : 'completed',
      incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
      output,
      usage: wireUsage(done.usage),
    };
  }

  private message(text: string, status: WireMessageItem['status']): WireMessageItem {
    return { id: this.messageId, type: 'message', role: 'assistant', status, content: [textPart(text)] };
  }
}

function textPart(text: string): WireOutputText {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

function functionCall(c: ToolCallEvent): WireFunctionCallItem {
  return { id: newId('fc_'), type: 'function_call', call_id: c.id || newId('call_'), name: c.name, arguments: c.arguments, status: 'completed' };
}

export function wireUsage(u: Usage): WireResponseUsage {
  return {
    input_tokens: u.promptTokens,
    input_tokens_details: { cached_tokens: u.cachedPromptTokens },
    output_tokens: u.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.promptTokens + u.completionTokens,
    svc_cached_prompt_tokens: u.cachedPromptTokens,
    svc_prefill_ms: u.prefillMs,
    svc_decode_ms: u.decodeMs,
  };
}
