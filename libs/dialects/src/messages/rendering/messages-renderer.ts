import { GenerationEvent, ToolCallEvent, Usage } from '../../../../engine/src/core/generation-events';
import { StreamWriter } from '../../../../http/src/sse';
import { collect, DoneEvent, newId } from '../../shared/collect';
import { primed } from '../../shared/primed';
import { WireContentBlock, WireMessage, WireStopReason, WireUsage } from '../protocol/wire-types';

/**
 * Renders the core event stream as a messages-dialect answer: one `message`
 * object, or the named SSE events (message_start, content_block_*, ping,
 * message_delta, message_stop) the official SDK accumulates.
 */
export class MessagesRenderer {
  private readonly id = newId('msg_');

  constructor(
    private readonly model: string,
    /** Prompt tokens, known before the first event (message_start carries them). */
    private readonly promptTokens: number,
    /** The caller's stop_sequences: only these are reported as stop_sequence (template stops are end_turn). */
    private readonly requestedStops: string[],
    /** Prompt tokens read from the cache, known once the first event arrived. */
    private readonly cachedPromptTokens: () => number = () => 0,
  ) {}

  async complete(events: AsyncIterable<GenerationEvent>): Promise<WireMessage> {
    const c = await collect(events);
    // Blocks in the order the stream opens them (thoughts may also come after text). No empty text
    // block: the dialect's API answers content [] when nothing visible came, and refuses an empty
    // text block when a client sends the turn back.
    const content: WireContentBlock[] = c.segments.map((s) => (s.kind === 'reasoning' ? { type: 'thinking', thinking: s.text, signature: '' } : { type: 'text', text: s.text }));
    for (const call of c.toolCalls) content.push(toolUseBlock(call));
    const { reason, sequence } = this.stopOf(c.done);
    return { ...this.shell(), content, stop_reason: reason, stop_sequence: sequence, usage: wireUsage(c.done.usage) };
  }

  async stream(source: AsyncIterable<GenerationEvent>, out: StreamWriter): Promise<void> {
    const events = await primed(source);
    // The first event came, so the request ran and its cached part is known: message_start splits
    // the prompt as message_delta does (clients that read input usage from message_start).
    const cached = this.cachedPromptTokens();
    const start = { ...this.shell(), content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: this.promptTokens - cached, output_tokens: 0, cache_read_input_tokens: cached, cache_creation_input_tokens: 0 } };
    out.event({ type: 'message_start', message: start }, 'message_start');
    out.event({ type: 'ping' }, 'ping');
    let index = 0;
    // The block being written: thoughts come first, then text, then tool calls.
    let open: 'thinking' | 'text' | undefined;
    const closeBlock = (): void => {
      out.event({ type: 'content_block_stop', index }, 'content_block_stop');
      index++;
      open = undefined;
    };
    const openBlock = (kind: 'thinking' | 'text'): void => {
      if (open === kind) return;
      if (open) closeBlock();
      const block = kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '', signature: '' };
      out.event({ type: 'content_block_start', index, content_block: block }, 'content_block_start');
      open = kind;
    };
    for await (const ev of events) {
      if (out.closed) break;
      if (ev.type === 'delta') {
        if (!ev.text) continue;
        openBlock('text');
        out.event({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: ev.text } }, 'content_block_delta');
      } else if (ev.type === 'reasoning') {
        openBlock('thinking');
        out.event({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: ev.text } }, 'content_block_delta');
      } else if (ev.type === 'tool_calls') {
        if (open) closeBlock();
        for (const call of ev.calls) {
          const block = toolUseBlock(call);
          out.event({ type: 'content_block_start', index, content_block: { ...block, input: {} } }, 'content_block_start');
          if (call.arguments) out.event({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: call.arguments } }, 'content_block_delta');
          closeBlock();
        }
      } else {
        if (open) closeBlock();
        const { reason, sequence } = this.stopOf(ev);
        out.event({ type: 'message_delta', delta: { stop_reason: reason, stop_sequence: sequence }, usage: wireUsage(ev.usage) }, 'message_delta');
        out.event({ type: 'message_stop' }, 'message_stop');
      }
    }
    out.end();
  }

  private shell(): Pick<WireMessage, 'id' | 'type' | 'role' | 'model'> {
    return { id: this.id, type: 'message', role: 'assistant', model: this.model };
  }

  private stopOf(done: DoneEvent): { reason: WireStopReason; sequence: string | null } {
    switch (done.finishReason) {
      case 'length':
        return { reason: 'max_tokens', sequence: null };
      case 'tool_calls':
        return { reason: 'tool_use', sequence: null };
      default:
        if (done.stopSequence !== undefined && this.requestedStops.includes(done.stopSequence)) return { reason: 'stop_sequence', sequence: done.stopSequence };
        return { reason: 'end_turn', sequence: null };
    }
  }
}

function toolUseBlock(call: ToolCallEvent): Extract<WireContentBlock, { type: 'tool_use' }> {
  return { type: 'tool_use', id: call.id || newId('toolu_'), name: call.name, input: parseInput(call.arguments) };
}

/** The call grammar makes arguments JSON; should a model still break it, the raw text is kept rather than lost. */
function parseInput(args: string): unknown {
  if (!args) return {};
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

/** Anthropic's accounting: input_tokens are the prompt tokens not read from the cache (their sum is the prompt). */
export function wireUsage(u: Usage): WireUsage {
  return {
    input_tokens: u.promptTokens - u.cachedPromptTokens,
    output_tokens: u.completionTokens,
    cache_read_input_tokens: u.cachedPromptTokens,
    cache_creation_input_tokens: 0,
  };
}
