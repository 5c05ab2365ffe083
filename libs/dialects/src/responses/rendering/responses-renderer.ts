import { GenerationEvent, ToolCallEvent, Usage } from '../../../../engine/src/core/generation-events';
import { StreamWriter } from '../../../../http/src/sse';
import { collect, DoneEvent, newId } from '../../shared/collect';
import { primed } from '../../shared/primed';
import { WireFunctionCallItem, WireMessageItem, WireOutputItem, WireOutputText, WireReasoningItem, WireResponse, WireResponseUsage } from '../protocol/wire-types';

/** Where an item's stream events point. */
interface ItemStream {
  item_id: string;
  output_index: number;
  content_index: number;
}

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
  private readonly reasoningId = newId('rs_');

  constructor(
    /** The response as it stands before generation (status in_progress, no output). */
    private readonly base: WireResponse,
    private readonly onFinal: OnFinal,
  ) {}

  async complete(events: AsyncIterable<GenerationEvent>): Promise<WireResponse> {
    const c = await collect(events);
    const final = this.finish(c.reasoning, c.text, c.toolCalls, c.done);
    await this.onFinal(final);
    return final;
  }

  async stream(source: AsyncIterable<GenerationEvent>, out: StreamWriter): Promise<void> {
    const events = await primed(source);
    const send = (type: string, body: Record<string, unknown>) => out.event({ type, sequence_number: this.sequence++, ...body }, type);
    send('response.created', { response: this.base });
    send('response.in_progress', { response: this.base });
    // Items in output order: the thoughts (when the model has any), the message, then calls.
    let thoughts: ItemStream | undefined;
    let thoughtsClosed = false;
    let message: ItemStream | undefined;
    let next = 0;
    const openThoughts = () => {
      thoughts = { item_id: this.reasoningId, output_index: next++, content_index: 0 };
      send('response.output_item.added', { output_index: thoughts.output_index, item: { ...this.reasoning('', 'in_progress'), content: [] } });
      send('response.content_part.added', { ...thoughts, part: reasoningPart('') });
    };
    const closeThoughts = (text: string, status: WireReasoningItem['status']) => {
      if (!thoughts || thoughtsClosed) return;
      thoughtsClosed = true;
      send('response.reasoning_text.done', { ...thoughts, text });
      send('response.content_part.done', { ...thoughts, part: reasoningPart(text) });
      send('response.output_item.done', { output_index: thoughts.output_index, item: this.reasoning(text, status) });
    };
    const openMessage = () => {
      closeThoughts(reasoning, 'completed');
      message = { item_id: this.messageId, output_index: next++, content_index: 0 };
      send('response.output_item.added', { output_index: message.output_index, item: { ...this.message('', 'in_progress'), content: [] } });
      send('response.content_part.added', { ...message, part: textPart('') });
    };
    let reasoning = '';
    let text = '';
    const calls: ToolCallEvent[] = [];
    let done: DoneEvent | undefined;
    for await (const ev of events) {
      if (out.closed) break;
      if (ev.type === 'delta') {
        if (!ev.text) continue;
        if (!message) openMessage();
        text += ev.text;
        send('response.output_text.delta', { ...message!, delta: ev.text, logprobs: [] });
      } else if (ev.type === 'reasoning') {
        if (!thoughts) openThoughts();
        reasoning += ev.text;
        send('response.reasoning_text.delta', { ...thoughts!, delta: ev.text });
      } else if (ev.type === 'tool_calls') calls.push(...ev.calls);
      else done = ev;
    }
    // A client gone or a cancelled generation: nothing to finish (the connection ends without [DONE]).
    if (!done || out.closed) return out.end();
    const final = this.finish(reasoning, text, calls, done);
    final.output.forEach((item, i) => {
      if (item.type === 'reasoning') closeThoughts(item.content[0].text, item.status);
      else if (item.type === 'message') {
        if (!message) openMessage();
        send('response.output_text.done', { ...message!, text: item.content[0].text, logprobs: [] });
        send('response.content_part.done', { ...message!, part: item.content[0] });
        send('response.output_item.done', { output_index: i, item });
      } else {
        closeThoughts(reasoning, 'completed');
        const at = { item_id: item.id, output_index: i };
        send('response.output_item.added', { output_index: i, item: { ...item, arguments: '', status: 'in_progress' } });
        send('response.function_call_arguments.delta', { ...at, delta: item.arguments });
        send('response.function_call_arguments.done', { ...at, name: item.name, arguments: item.arguments });
        send('response.output_item.done', { output_index: i, item });
      }
    });
    await this.onFinal(final);
    send(final.status === 'completed' ? 'response.completed' : 'response.incomplete', { response: final });
    out.event('[DONE]');
    out.end();
  }

  /**
   * The finished response: the thoughts first when there are any, then a message unless the
   * turn is only tool calls (or only thoughts cut short), then one item per call.
   */
  private finish(reasoning: string, text: string, calls: ToolCallEvent[], done: DoneEvent): WireResponse {
    const incomplete = done.finishReason === 'length';
    const output: WireOutputItem[] = [];
    // Thoughts cut by max_output_tokens, with no answer after them, are what is incomplete.
    const thoughtsOnly = reasoning !== '' && text === '' && calls.length === 0;
    if (reasoning !== '') output.push(this.reasoning(reasoning, incomplete && thoughtsOnly ? 'incomplete' : 'completed'));
    if (text !== '' || (calls.length === 0 && !thoughtsOnly)) output.push(this.message(text, incomplete ? 'incomplete' : 'completed'));
    for (const c of calls) output.push(functionCall(c));
    return {
      ...this.base,
      status: incomplete ? 'incomplete' : 'completed',
      incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
      output,
      usage: wireUsage(done.usage),
    };
  }

  private reasoning(text: string, status: WireReasoningItem['status']): WireReasoningItem {
    return { id: this.reasoningId, type: 'reasoning', summary: [], content: text ? [reasoningPart(text)] : [], status };
  }

  private message(text: string, status: WireMessageItem['status']): WireMessageItem {
    return { id: this.messageId, type: 'message', role: 'assistant', status, content: [textPart(text)] };
  }
}

function reasoningPart(text: string): { type: 'reasoning_text'; text: string } {
  return { type: 'reasoning_text', text };
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
