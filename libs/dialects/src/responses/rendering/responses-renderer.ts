import { wireLogprob } from '../../openai/rendering/chat-renderer';
import { WireChatLogprob as WireLogprob } from '../../openai/protocol/wire-types';
import { GenerationEvent, TokenLogprob, ToolCallEvent, Usage } from '../../../../engine/src/core/generation-events';
import { StreamWriter } from '../../../../http/src/sse';
import { collect, DoneEvent, newId, Segment } from '../../shared/collect';
import { primed } from '../../shared/primed';
import { WireFunctionCallItem, WireMessageItem, WireOutputItem, WireOutputText, WireReasoningItem, WireResponse, WireResponseUsage } from '../protocol/wire-types';

/** Called with the finished response before the client hears of it (so a chained turn finds it stored). */
export type OnFinal = (r: WireResponse) => Promise<void>;

/** A reasoning or message item being written: its text so far and where its events point. */
interface OpenItem {
  kind: Segment['kind'];
  id: string;
  index: number;
  text: string;
  /** The text's tokens' log-probabilities (include "message.output_text.logprobs"). */
  logprobs: WireLogprob[];
}

/**
 * Renders the core event stream as a Responses object, or as the public
 * Responses event sequence: response.created, response.in_progress, then per
 * output item output_item.added … output_item.done (thoughts: content_part and
 * reasoning_text events; text: content_part and output_text events; tool calls:
 * function_call_arguments events), then response.completed (or
 * response.incomplete), then `data: [DONE]`. Items follow the output's order:
 * a reasoning item per run of thoughts, a message item per run of text, then calls.
 */
export class ResponsesRenderer {
  private sequence = 0;
  private readonly firstMessageId = newId('msg_');
  private firstMessageUsed = false;

  constructor(
    /** The response as it stands before generation (status in_progress, no output). */
    private readonly base: WireResponse,
    private readonly onFinal: OnFinal,
  ) {}

  async complete(events: AsyncIterable<GenerationEvent>): Promise<WireResponse> {
    const c = await collect(events);
    const items = c.segments.map((seg, i) => this.item({ kind: seg.kind, id: this.itemId(seg.kind), index: i, text: seg.text, logprobs: wireLogprobs(seg.logprobs) }, 'completed'));
    const final = this.finish(items, c.toolCalls, c.done);
    await this.onFinal(final);
    return final;
  }

  async stream(source: AsyncIterable<GenerationEvent>, out: StreamWriter): Promise<void> {
    const events = await primed(source);
    const send = (type: string, body: Record<string, unknown>) => out.event({ type, sequence_number: this.sequence++, ...body }, type);
    send('response.created', { response: this.base });
    send('response.in_progress', { response: this.base });
    const items: Array<WireReasoningItem | WireMessageItem> = [];
    let cur: OpenItem | undefined;
    const at = (o: OpenItem) => ({ item_id: o.id, output_index: o.index, content_index: 0 });
    const open = (kind: Segment['kind']) => {
      cur = { kind, id: this.itemId(kind), index: items.length, text: '', logprobs: [] };
      send('response.output_item.added', { output_index: cur.index, item: { ...this.item(cur, 'in_progress'), content: [] } });
      send('response.content_part.added', { ...at(cur), part: kind === 'reasoning' ? reasoningPart('') : textPart('') });
    };
    const close = (status: WireMessageItem['status']) => {
      const o = cur!;
      const item = this.item(o, status);
      if (o.kind === 'reasoning') send('response.reasoning_text.done', { ...at(o), text: o.text });
      else send('response.output_text.done', { ...at(o), text: o.text, logprobs: o.logprobs });
      send('response.content_part.done', { ...at(o), part: item.content[0] ?? (o.kind === 'reasoning' ? reasoningPart('') : textPart('')) });
      send('response.output_item.done', { output_index: o.index, item });
      items.push(item);
      cur = undefined;
    };
    const calls: ToolCallEvent[] = [];
    let done: DoneEvent | undefined;
    for await (const ev of events) {
      if (out.closed) break;
      if (ev.type === 'delta' || ev.type === 'reasoning') {
        const kind = ev.type === 'delta' ? 'text' : 'reasoning';
        const logprobs = kind === 'text' ? wireLogprobs(ev.logprobs) : [];
        // Tokens whose text was held back (the end of the answer) still get their logprobs.
        if (!ev.text) {
          if (cur?.kind === 'text' && logprobs.length) cur.logprobs.push(...logprobs);
          continue;
        }
        if (cur?.kind !== kind) {
          if (cur) close('completed');
          open(kind);
        }
        cur!.text += ev.text;
        cur!.logprobs.push(...logprobs);
        if (kind === 'text') send('response.output_text.delta', { ...at(cur!), delta: ev.text, logprobs });
        else send('response.reasoning_text.delta', { ...at(cur!), delta: ev.text });
      } else if (ev.type === 'tool_calls') calls.push(...ev.calls);
      else done = ev;
    }
    // A client gone or a cancelled generation: nothing to finish (the connection ends without [DONE]).
    if (!done || out.closed) return out.end();
    // The last item is what max_output_tokens cut; a turn with no output at all still answers an (empty) message.
    if (!cur && items.length === 0 && calls.length === 0) open('text');
    if (cur) close(done.finishReason === 'length' ? 'incomplete' : 'completed');
    const final = this.finish(items, calls, done);
    final.output.forEach((item, i) => {
      if (item.type !== 'function_call') return;
      const where = { item_id: item.id, output_index: i };
      send('response.output_item.added', { output_index: i, item: { ...item, arguments: '', status: 'in_progress' } });
      send('response.function_call_arguments.delta', { ...where, delta: item.arguments });
      send('response.function_call_arguments.done', { ...where, name: item.name, arguments: item.arguments });
      send('response.output_item.done', { output_index: i, item });
    });
    await this.onFinal(final);
    send(final.status === 'completed' ? 'response.completed' : 'response.incomplete', { response: final });
    out.event('[DONE]');
    out.end();
  }

  /**
   * The finished response: the reasoning and message items as written (the last one cut when
   * max_output_tokens was reached; an empty message when nothing at all was written), then one
   * item per call.
   */
  private finish(items: Array<WireReasoningItem | WireMessageItem>, calls: ToolCallEvent[], done: DoneEvent): WireResponse {
    const incomplete = done.finishReason === 'length';
    const output: WireOutputItem[] = [...items];
    if (output.length === 0 && calls.length === 0) output.push(this.item({ kind: 'text', id: this.itemId('text'), index: 0, text: '', logprobs: [] }, 'completed'));
    const last = output[output.length - 1];
    if (incomplete && last) output[output.length - 1] = { ...last, status: 'incomplete' } as WireOutputItem;
    for (const c of calls) output.push(functionCall(c));
    return {
      ...this.base,
      status: incomplete ? 'incomplete' : 'completed',
      incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
      output,
      usage: wireUsage(done.usage),
    };
  }

  /** Each item gets its own id; the first message takes the one made up front. */
  private itemId(kind: Segment['kind']): string {
    if (kind === 'reasoning') return newId('rs_');
    if (this.firstMessageUsed) return newId('msg_');
    this.firstMessageUsed = true;
    return this.firstMessageId;
  }

  private item(o: OpenItem, status: WireMessageItem['status']): WireReasoningItem | WireMessageItem {
    if (o.kind === 'reasoning') return { id: o.id, type: 'reasoning', summary: [], content: o.text ? [reasoningPart(o.text)] : [], status };
    return { id: o.id, type: 'message', role: 'assistant', status, content: [textPart(o.text, o.logprobs)] };
  }
}

function reasoningPart(text: string): { type: 'reasoning_text'; text: string } {
  return { type: 'reasoning_text', text };
}

function textPart(text: string, logprobs: WireLogprob[] = []): WireOutputText {
  return { type: 'output_text', text, annotations: [], logprobs };
}

function wireLogprobs(lps: TokenLogprob[] | undefined): WireLogprob[] {
  return (lps ?? []).map(wireLogprob);
}

function functionCall(c: ToolCallEvent): WireFunctionCallItem {
  return { id: newId('fc_'), type: 'function_call', call_id: c.id || newId('call_'), name: c.name, arguments: c.arguments, status: 'completed' };
}

export function wireUsage(u: Usage): WireResponseUsage {
  return {
    input_tokens: u.promptTokens,
    input_tokens_details: { cached_tokens: u.cachedPromptTokens },
    output_tokens: u.completionTokens,
    output_tokens_details: { reasoning_tokens: u.reasoningTokens ?? 0 },
    total_tokens: u.promptTokens + u.completionTokens,
    svc_cached_prompt_tokens: u.cachedPromptTokens,
    svc_prefill_ms: u.prefillMs,
    svc_decode_ms: u.decodeMs,
  };
}
