import { useBackendSampling } from '../../libs/engine/src/models/backend-sampling';

describe('-backend-sampling policy', () => {
  const model = { nLayer: 24, nVocab: 151936 };
  it('auto: only with every layer, the output layer included, on a CUDA GPU', () => {
    expect(useBackendSampling({ ...model, mode: 'auto', backend: 'cuda', gpuLayers: -1 })).toBe(true);
    expect(useBackendSampling({ ...model, mode: 'auto', backend: 'cuda', gpuLayers: 25 })).toBe(true);
    // 24 repeating layers offloaded leave the output layer (and its logits) on the CPU.
    expect(useBackendSampling({ ...model, mode: 'auto', backend: 'cuda', gpuLayers: 24 })).toBe(false);
    expect(useBackendSampling({ ...model, mode: 'auto', backend: 'cuda', gpuLayers: 0 })).toBe(false);
    expect(useBackendSampling({ ...model, mode: 'auto', backend: 'cpu', gpuLayers: -1 })).toBe(false);
    // Unmeasured on Metal: there only with -backend-sampling on.
    expect(useBackendSampling({ ...model, mode: 'auto', backend: 'metal', gpuLayers: -1 })).toBe(false);
    expect(useBackendSampling({ ...model, mode: 'on', backend: 'metal', gpuLayers: -1 })).toBe(true);
  });
  it('auto: not for a small vocabulary (sampling it costs the CPU next to nothing)', () => {
    expect(useBackendSampling({ ...model, mode: 'auto', backend: 'cuda', gpuLayers: -1, nVocab: 512 })).toBe(false);
    expect(useBackendSampling({ ...model, mode: 'auto', backend: 'cuda', gpuLayers: -1, nVocab: 32000 })).toBe(true);
    expect(useBackendSampling({ ...model, mode: 'on', backend: 'cuda', gpuLayers: -1, nVocab: 512 })).toBe(true);
  });
  it('on and off whatever the backend', () => {
    expect(useBackendSampling({ ...model, mode: 'on', backend: 'cpu', gpuLayers: 0 })).toBe(true);
    expect(useBackendSampling({ ...model, mode: 'off', backend: 'cuda', gpuLayers: -1 })).toBe(false);
  });
});
