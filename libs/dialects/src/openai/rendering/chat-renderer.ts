import { GenerationEvent, TokenLogprob, ToolCallEvent } from '../../../../engine/src/core/generation-events';
import { MediaTally } from '../../../../engine/src/media/media-plan';
import { StreamWriter } from '../../../../http/src/sse';
import { collect, newId, nowSeconds } from '../../shared/collect';
import { primed } from '../../shared/primed';
import { WireChatLogprob, WireToolCall } from '../protocol/wire-types';
import { wireUsage } from './usage';

/** Renders the core event stream as chat.completion / chat.completion.chunk. */
export class ChatRenderer {
  private readonly id = newId('chatcmpl-');
  private readonly created = nowSeconds();

  constructor(
    private readonly model: string,
    /** The spec's svc_media: in the whole answer's body when the prompt's pictures were thinned. */
    private readonly media?: MediaTally,
  ) {}

  async complete(events: AsyncIterable<GenerationEvent>): Promise<unknown> {
    const c = await collect(events);
    const toolCalls = c.toolCalls.map(wireToolCall);
    return {
      id: this.id,
      object: 'chat.completion',
      created: this.created,
      model: this.model,
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: toolCalls.length && !c.text ? null : c.text,
            // The API always sends it (the official client's type requires it); nothing here refuses.
            refusal: null,
            // llama-server's field for a reasoning model's thoughts (reasoning_format deepseek).
            ...(c.reasoning ? { reasoning_content: c.reasoning } : {}),
            ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
          },
          logprobs: c.logprobs.length ? { content: c.logprobs.map(wireLogprob) } : null,
          finish_reason: c.done.finishReason,
        },
      ],
      usage: wireUsage(c.done.usage),
      ...(this.media ? { svc_media: this.media } : {}),
    };
  }

  async stream(source: AsyncIterable<GenerationEvent>, out: StreamWriter): Promise<void> {
    const events = await primed(source);
    out.event(this.chunk({ role: 'assistant', content: '' }, null));
    for await (const ev of events) {
      if (out.closed) break;
      if (ev.type === 'delta') {
        if (ev.text) out.event(this.chunk({ content: ev.text }, null));
      } else if (ev.type === 'reasoning') {
        out.event(this.chunk({ reasoning_content: ev.text }, null));
      } else if (ev.type === 'tool_calls') {
        out.event(this.chunk({ tool_calls: ev.calls.map((c) => ({ index: c.index, ...wireToolCall(c) })) }, null));
      } else {
        out.event({ ...this.chunk({}, ev.finishReason), usage: wireUsage(ev.usage) });
        out.event('[DONE]');
      }
    }
    out.end();
  }

  private chunk(delta: Record<string, unknown>, finish: string | null): Record<string, unknown> {
    return {
      id: this.id,
      object: 'chat.completion.chunk',
      created: this.created,
      model: this.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    };
  }
}

export function wireToolCall(c: ToolCallEvent): WireToolCall {
  return { id: c.id || newId('call_'), type: 'function', function: { name: c.name, arguments: c.arguments } };
}

/** A token's log-probability in the OpenAI shape (chat's logprobs.content, Responses' output_text.logprobs). */
export function wireLogprob(l: TokenLogprob): WireChatLogprob {
  return { token: l.token, logprob: l.logprob, bytes: l.bytes, top_logprobs: l.top };
}
