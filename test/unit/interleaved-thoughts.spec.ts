import { GenerationEvent } from '../../libs/engine/src/core/generation-events';
import { StreamWriter } from '../../libs/http/src/sse';
import { MessagesRenderer } from '../../libs/dialects/src/messages/rendering/messages-renderer';
import { ResponsesRenderer } from '../../libs/dialects/src/responses/rendering/responses-renderer';
import { WireResponse } from '../../libs/dialects/src/responses/protocol/wire-types';

/**
 * Thoughts may come back after answer text (gpt-oss writes a preamble between analyses): the
 * streamed answer and the collected one list the same blocks / items, in the order they came.
 */
const usage = { promptTokens: 3, completionTokens: 4, cachedPromptTokens: 0, prefillMs: 1, decodeMs: 1 };
function events(finishReason: 'stop' | 'length' = 'stop'): AsyncIterable<GenerationEvent> {
  const list: GenerationEvent[] = [
    { type: 'reasoning', text: 'think ' },
    { type: 'reasoning', text: 'more' },
    { type: 'delta', text: 'Let me check.' },
    { type: 'reasoning', text: 'again' },
    { type: 'delta', text: 'Done.' },
    { type: 'done', finishReason, usage, model: 'm' },
  ];
  return (async function* () {
    yield* list;
  })();
}
function writer(): { out: StreamWriter; sent: Array<Record<string, any>> } {
  const sent: Array<Record<string, any>> = [];
  const out = { closed: false, event: (d: unknown) => d !== '[DONE]' && sent.push(d as Record<string, any>), line: () => undefined, end: () => undefined };
  return { out: out as unknown as StreamWriter, sent };
}
const base = { id: 'resp_1', object: 'response', status: 'in_progress', output: [] } as unknown as WireResponse;

describe('thoughts after answer text', () => {
  it('Responses: one item per run, in order, with the same items streamed and collected', async () => {
    const collected = await new ResponsesRenderer(base, async () => undefined).complete(events());
    const { out, sent } = writer();
    await new ResponsesRenderer(base, async () => undefined).stream(events(), out);
    const streamed = sent.find((e) => e.type === 'response.completed')!.response as WireResponse;
    const shape = (r: WireResponse) => r.output.map((i) => (i.type === 'function_call' ? i.type : `${i.type}:${i.content.map((p) => p.text).join('')}:${i.status}`));
    expect(shape(collected)).toEqual(['reasoning:think more:completed', 'message:Let me check.:completed', 'reasoning:again:completed', 'message:Done.:completed']);
    expect(shape(streamed)).toEqual(shape(collected));
    // Every delta points at an item that was added and not yet done.
    const open = new Set<number>();
    for (const e of sent) {
      if (e.type === 'response.output_item.added') open.add(e.output_index);
      if (e.type === 'response.output_item.done') open.delete(e.output_index);
      if (e.type.endsWith('.delta')) expect(open.has(e.output_index)).toBe(true);
    }
    expect(sent.filter((e) => e.type === 'response.output_item.added').map((e) => e.output_index)).toEqual([0, 1, 2, 3]);
  });

  it('Responses: max_output_tokens marks the last item incomplete, streamed or not', async () => {
    const collected = await new ResponsesRenderer(base, async () => undefined).complete(events('length'));
    const { out, sent } = writer();
    await new ResponsesRenderer(base, async () => undefined).stream(events('length'), out);
    const streamed = sent.find((e) => e.type === 'response.incomplete')!.response as WireResponse;
    for (const r of [collected, streamed]) expect(r.output.map((i) => (i as { status: string }).status)).toEqual(['completed', 'completed', 'completed', 'incomplete']);
  });

  it('messages: thinking and text blocks alternate the same way streamed and collected', async () => {
    const collected = await new MessagesRenderer('m', 3, []).complete(events());
    const { out, sent } = writer();
    await new MessagesRenderer('m', 3, []).stream(events(), out);
    const blocks: Array<Record<string, string>> = [];
    for (const e of sent) {
      if (e.type === 'content_block_start') blocks[e.index] = { ...e.content_block };
      if (e.type === 'content_block_delta') {
        const b = blocks[e.index];
        if (e.delta.type === 'thinking_delta') b.thinking += e.delta.thinking;
        else b.text += e.delta.text;
      }
    }
    expect(collected.content).toEqual([
      { type: 'thinking', thinking: 'think more', signature: '' },
      { type: 'text', text: 'Let me check.' },
      { type: 'thinking', thinking: 'again', signature: '' },
      { type: 'text', text: 'Done.' },
    ]);
    expect(blocks).toEqual(collected.content);
  });
});
