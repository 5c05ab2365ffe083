import { withModelDefaults } from '../../libs/engine/src/models/model-defaults';
import { GenerationRequest } from '../../libs/engine/src/core/generation-request';
import { defaultsOf, parametersText } from '../../libs/store/src/model-defaults';

const req = (over: Partial<GenerationRequest> = {}): GenerationRequest => ({
  model: 'm',
  prompt: { kind: 'chat', messages: [{ role: 'user', content: 'hi' }] },
  sampling: {},
  maxTokens: 8,
  stop: [],
  constraint: { kind: 'none' },
  logprobs: 0,
  retainPrefix: true,
  ...over,
});

describe('a model\'s defaults under the request', () => {
  it('fills what the request leaves out and keeps what it sets', () => {
    const d = { options: { temperature: 0.2, top_k: 7, seed: 3, stop: ['a', '', 5, 'b'], num_ctx: 8192, mirostat: 2 }, system: 'S' };
    const out = withModelDefaults(req({ sampling: { topK: 40 } }), d);
    expect(out.sampling).toEqual({ temperature: 0.2, topK: 40, seed: 3 });
    expect(out.stop).toEqual(['a', 'b']);
    expect(out.prompt).toEqual({ kind: 'chat', messages: [{ role: 'system', content: 'S' }, { role: 'user', content: 'hi' }] });
    expect(withModelDefaults(req({ stop: ['mine'] }), d).stop).toEqual(['mine']);
  });

  it('skips values no author meant, and leaves raw text and a system turn alone', () => {
    const d = { options: { temperature: 'hot', seed: 1.5, top_p: Infinity, top_k: 2.5, repeat_last_n: -0.5 }, system: 'S' };
    expect(withModelDefaults(req(), { options: d.options }).sampling).toEqual({});
    const raw = req({ prompt: { kind: 'text', text: 'x' } });
    expect(withModelDefaults(raw, d)).toBe(raw);
    const sys = req({ prompt: { kind: 'chat', messages: [{ role: 'system', content: 'mine' }] } });
    expect(withModelDefaults(sys, d)).toBe(sys);
    const dev = req({ prompt: { kind: 'chat', messages: [{ role: 'developer', content: 'mine' }] } });
    expect(withModelDefaults(dev, d)).toBe(dev);
  });

  it('reads the layers once per content, ignores a params layer that is not a JSON object, and writes parameters as the local runner', () => {
    const layer = (mediaType: string, digest: string) => ({ mediaType, digest, size: 10 });
    const texts: Record<string, string> = { 'sha256:p': '[1,2]', 'sha256:s': 'Sys' };
    let reads = 0;
    const read = (d: string) => (reads++, texts[d]);
    const m = { schemaVersion: 2, layers: [layer('application/vnd.ollama.image.params', 'sha256:p'), layer('application/vnd.ollama.image.system', 'sha256:s')] };
    expect(defaultsOf(m, read)).toEqual({ options: {}, system: 'Sys' });
    expect(defaultsOf(m, read)).toEqual({ options: {}, system: 'Sys' });
    expect(reads).toBe(2); // params and system, on the first call only
    expect(parametersText({ stop: ['<|im_end|>', 'x'], temperature: 0.7 })).toBe(`${'stop'.padEnd(30)} "<|im_end|>"\n${'stop'.padEnd(30)} "x"\n${'temperature'.padEnd(30)} 0.7`);
  });
});
