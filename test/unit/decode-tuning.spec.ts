import { decodeTuning } from '../../libs/engine/src/models/model-manager';

describe('decodeTuning', () => {
  it('streams chains when JS has a CPU of its own (a GPU, or -threads below the CPUs)', () => {
    expect(decodeTuning(true, {})).toEqual({ pipeline: true, chainSteps: undefined, chainMs: undefined, streamMs: 2 });
  });

  it('chains up to 100 ms when decode threads take every CPU, so a mid-size model is not one step per JS round trip', () => {
    expect(decodeTuning(false, {})).toEqual({ pipeline: false, chainSteps: undefined, chainMs: 100, streamMs: -1 });
  });

  it('lets the environment override each knob', () => {
    const env = { SVC_PIPELINE: '1', SVC_CHAIN_STEPS: '8', SVC_CHAIN_MS: '24', SVC_STREAM_MS: '-1' };
    expect(decodeTuning(false, env)).toEqual({ pipeline: true, chainSteps: 8, chainMs: 24, streamMs: -1 });
    expect(decodeTuning(true, { SVC_PIPELINE: '0', SVC_CHAIN_MS: 'x' })).toEqual({ pipeline: false, chainSteps: undefined, chainMs: undefined, streamMs: 2 });
  });
});
