import { join, resolve } from 'node:path';
import { capabilitiesOf, readGgufMetadata } from '../../libs/store/src/gguf-metadata';
import { sameModel } from '../../libs/store/src/model-names';

const models = process.env.SVC_MODELS_DIR ?? resolve(__dirname, '..', '..', '..', 'shared', 'models');

describe('GGUF metadata without loading weights', () => {
  it('reads stories260K as a completion model', () => {
    const m = readGgufMetadata(join(models, 'stories260K.gguf'))!;
    expect(m.kv['general.architecture']).toBe('llama');
    expect(m.kv['llama.context_length']).toBe(2048);
    expect(m.tensorCount).toBeGreaterThan(0);
    expect(capabilitiesOf(m)).toEqual(['completion']);
    // The tensor table's elements: llama.cpp's llama_model_n_params for this file.
    expect(m.paramCount).toBe(292_800);
  });
  it('gives a vision projector empty capabilities', () => {
    expect(capabilitiesOf(readGgufMetadata(join(models, 'mmproj-tinygemma3.gguf')))).toEqual([]);
  });
  it('returns undefined for non-GGUF files', () => {
    expect(readGgufMetadata(join(models, 'for-tests-ggml-tiny.bin'))).toBeUndefined();
  });
  it('matches names loosely', () => {
    expect(sameModel('Stories260K', 'stories260k:latest')).toBe(true);
    expect(sameModel('a:v1', 'a')).toBe(false);
    // Fully qualified names find the short listing, as the local runner resolves them.
    expect(sameModel('registry.ollama.ai/library/qwen2.5:latest', 'qwen2.5:latest')).toBe(true);
    expect(sameModel('library/Tiny', 'tiny')).toBe(true);
    expect(sameModel('Library/X', 'x')).toBe(true);
    expect(sameModel('registry.ollama.ai/me/tiny', 'me/tiny:latest')).toBe(true);
    expect(sameModel('me/tiny', 'tiny')).toBe(false);
    expect(sameModel('stories260K+my lora', 'Stories260K+My Lora')).toBe(true);
  });
});
