import { NativeModel, NativeSampler } from '../../libs/engine/src/backend/native-addon';
import { GenerationEvent } from '../../libs/engine/src/core/generation-events';
import { Sequence, SequenceSpec } from '../../libs/engine/src/scheduler/sequence';

/**
 * Stop strings are for the answer's text, not for tool-call syntax: once the lazy tool grammar's
 * marker has been written, a stop string such as "\n" no longer ends the request (it cut every
 * call whose syntax holds a newline, and the call was lost).
 */
describe('Sequence: stop strings and an opened tool call', () => {
  const pieces = ['Hi', '\n', '<tool', '_call', '>\n', '{"a":1}', '\n', '</tool_call>'];
  const model = { tokenToPiece: (t: number) => Buffer.from(pieces[t]), isEog: () => false } as unknown as NativeModel;
  const spec = (over: Partial<SequenceSpec>): SequenceSpec => ({
    modelName: 'm',
    promptTokens: Int32Array.of(1),
    sampler: {} as NativeSampler,
    maxTokens: 100,
    stop: ['\n'],
    logprobs: 0,
    retainPrefix: false,
    ...over,
  });
  /** Feeds tokens from `from` on; returns where generation stopped (the token index) and the stop string. */
  const run = (s: Sequence, from: number): { at: number; stop?: string } => {
    for (let t = from; t < pieces.length; t++) {
      const r = s.accept(t, null, 1000);
      if (r.finish) return { at: t, stop: r.stop };
    }
    return { at: -1 };
  };
  const texts = async (s: Sequence) => {
    s.finish('stop', undefined, performance.now());
    let text = '';
    for await (const ev of s.channel as AsyncIterable<GenerationEvent>) if (ev.type === 'delta') text += ev.text;
    return text;
  };

  it('without a call marker the first "\\n" ends it, as before', () => {
    expect(run(new Sequence(spec({}), model), 0)).toEqual({ at: 1, stop: '\n' });
  });

  it('text before the marker still stops at "\\n"', () => {
    expect(run(new Sequence(spec({ callMarker: /<tool_call>/ }), model), 0)).toEqual({ at: 1, stop: '\n' });
  });

  it('the template\'s own stops still hold in the call (they end the turn)', () => {
    const s = new Sequence(spec({ stop: ['\n', '</tool_call>'], callStops: ['</tool_call>'], callMarker: /<tool_call>/ }), model);
    expect(run(s, 2)).toEqual({ at: 7, stop: '</tool_call>' });
  });

  it('once the marker is written (across tokens), "\\n" in the call no longer stops it', async () => {
    const s = new Sequence(spec({ callMarker: /<tool_call>/ }), model);
    expect(run(s, 2)).toEqual({ at: -1 });
    expect(await texts(s)).toBe('<tool_call>\n{"a":1}\n</tool_call>');
  });
});
