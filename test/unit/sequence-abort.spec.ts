import { NativeModel, NativeSampler } from '../../libs/engine/src/backend/native-addon';
import { Sequence, SequenceSpec } from '../../libs/engine/src/scheduler/sequence';

/**
 * A client can leave before its request reaches the scheduler (while the model loads, or a long
 * prompt tokenizes). Its signal has already fired 'abort' then: a listener added afterwards never
 * runs, and the request generated to max_tokens for nobody.
 */
describe('Sequence and its client signal', () => {
  const spec = (signal: AbortSignal): SequenceSpec => ({
    modelName: 'm',
    promptTokens: Int32Array.of(1, 2),
    sampler: {} as NativeSampler,
    maxTokens: 10,
    stop: [],
    logprobs: 0,
    retainPrefix: false,
    signal,
  });
  const model = {} as NativeModel;

  it('is cancelled at once when the signal was aborted before it was made', () => {
    const ac = new AbortController();
    ac.abort();
    expect(new Sequence(spec(ac.signal), model).cancelled).toBe(true);
  });

  it('is cancelled when the signal aborts later, and calls onCancel once', () => {
    const ac = new AbortController();
    const s = new Sequence(spec(ac.signal), model);
    let calls = 0;
    s.onCancel = () => calls++;
    expect(s.cancelled).toBe(false);
    ac.abort();
    ac.abort();
    expect([s.cancelled, calls]).toEqual([true, 1]);
  });
});
