import { Category } from '../../libs/route/src/categories';
import { Candidate, paramText, pick, rankModels, scoreModel, strength } from '../../libs/route/src/rank/model-ranker';
import { isChatEntry, traitsOf } from '../../libs/route/src/rank/model-traits';
import { CatalogEntry } from '../../libs/store/src/catalog';
import { MEDIA_PROJECTOR } from '../../libs/store/src/manifest-store';

const model = (name: string, params: number, more: Partial<Candidate> = {}): Candidate => ({
  name,
  params,
  context: 4096,
  vision: false,
  tools: false,
  thinks: false,
  vocab: 32_000,
  names: name,
  fitsContext: true,
  fitsMemory: true,
  ...more,
});

const names = (category: Category, cs: Candidate[]) => rankModels(category, cs).map((s) => s.candidate.name);

describe('route: model ranking', () => {
  it('one point is a doubling of parameters, at most 10', () => {
    expect(strength(1e9)).toBe(4);
    expect(strength(8e9)).toBe(7);
    expect(strength(2e9) - strength(1e9)).toBeCloseTo(1, 10);
    expect(strength(10e6)).toBeCloseTo(-2.64, 2);
    expect(strength(1e12)).toBe(10);
  });

  it('general: the bigger model first; the score and reason say why', () => {
    const s = scoreModel('general', model('a', 8e9, { tools: true }));
    expect(s.score).toBe(7.5);
    expect(s.reason).toBe('8B parameters +7, renders tools +0.5');
    expect(names('general', [model('small', 1e9), model('big', 8e9)])).toEqual(['big', 'small']);
  });

  it('code: a coder by name is worth three doublings (it beats a model under eight times its size)', () => {
    const coder = model('qwen2.5-coder:7b', 7e9);
    const plain = model('llama3:16b', 16e9);
    expect(names('code', [plain, coder])).toEqual(['qwen2.5-coder:7b', 'llama3:16b']);
    expect(names('general', [plain, coder])).toEqual(['llama3:16b', 'qwen2.5-coder:7b']);
    expect(names('code', [model('llama3:70b', 70e9), coder])).toEqual(['llama3:70b', 'qwen2.5-coder:7b']);
  });

  it('reasoning: a think block counts, a reasoning name counts less without one', () => {
    const thinker = model('qwen3:4b', 4e9, { thinks: true });
    const named = model('deepseek-r1-distill:4b', 4e9);
    const plain = model('mistral:7b', 7e9);
    const ranked = rankModels('reasoning', [plain, named, thinker]);
    expect(ranked.map((s) => [s.candidate.name, s.score])).toEqual([
      ['qwen3:4b', 9],
      ['deepseek-r1-distill:4b', 8],
      ['mistral:7b', 6.81],
    ]);
  });

  it('multilingual: a large vocabulary and a multilingual name count', () => {
    const qwen = model('qwen2:7b', 7e9, { vocab: 151_936 });
    const llama2 = model('llama2:13b', 13e9, { vocab: 32_000 });
    const aya = model('aya:8b', 8e9, { vocab: 256_000 });
    expect(names('multilingual', [llama2, qwen, aya])).toEqual(['aya:8b', 'qwen2:7b', 'llama2:13b']);
  });

  it('image: a vision projector is worth five doublings; long-context: the context a request gets', () => {
    expect(names('image', [model('big', 64e9), model('llava', 7e9, { vision: true })])).toEqual(['llava', 'big']);
    const long = model('long', 4e9, { context: 32768 });
    expect(scoreModel('long-context', long).score).toBe(9);
    expect(names('long-context', [model('short', 8e9), long])).toEqual(['long', 'short']);
  });

  it('quick-chat: size counts half and a small model gets a point', () => {
    expect(scoreModel('quick-chat', model('s', 2e9)).score).toBe(3.5);
    expect(scoreModel('quick-chat', model('b', 32e9)).score).toBe(4.5);
  });

  it('a model that cannot hold the conversation, or has no memory left, loses points', () => {
    const s = scoreModel('general', model('x', 8e9, { fitsContext: false, fitsMemory: false }));
    expect(s.score).toBe(7 - 5 - 3);
    expect(s.reason).toBe('8B parameters +7, the conversation does not fit its 4096 positions -5, does not fit the memory left -3');
    expect(names('general', [model('big', 64e9, { fitsMemory: false }), model('fits', 16e9)])).toEqual(['fits', 'big']);
  });

  it('ties go to the smaller model, then by name', () => {
    expect(names('quick-chat', [model('b', 8e9), model('a', 8e9), model('c', 1e9, { fitsMemory: false })])).toEqual(['a', 'b', 'c']);
    expect(names('image', [model('b', 2e9), model('a', 2e9), model('c', 1e9, { vision: true })])).toEqual(['c', 'a', 'b']);
    expect(names('general', [model('x', 128e9), model('y', 64e9)])).toEqual(['y', 'x']);
  });

  it('local and best take the first; cheap the smallest within one point of the best', () => {
    const ranked = rankModels('general', [model('8b', 8e9), model('4b', 4e9), model('3b', 3e9), model('16b', 16e9)]);
    expect(pick(ranked, 'best')!.chosen.candidate.name).toBe('16b');
    expect(pick(ranked, 'local')!.chosen.candidate.name).toBe('16b');
    const cheap = pick(ranked, 'cheap')!;
    // 16B scores 8, 8B 7 (one point below: in), 4B 6 (out).
    expect(cheap.chosen.candidate.name).toBe('8b');
    expect(cheap.reason).toBe('the smallest model within one point of the best (16b scores 8; this one 7)');
    expect(pick(rankModels('general', [model('only', 1e9)]), 'cheap')!.reason).toMatch(/no smaller model within one point/);
    expect(pick([], 'best')).toBeUndefined();
  });

  it('cheap compares the rounded scores the answer shows', () => {
    // 4.9995 shows as 5 and 3.9996 as 4: exactly one point apart, so b is in.
    const r2 = rankModels('general', [model('a', 1e9 * 2 ** 0.9995), model('b', 1e9 * 2 ** -0.0004)]);
    expect(r2.map((s) => s.score)).toEqual([5, 4]);
    expect(pick(r2, 'cheap')!.chosen.candidate.name).toBe('b');
  });

  it('params are shown as the local runner shows sizes', () => {
    expect([paramText(9_950_144), paramText(7e9), paramText(1.5e9), paramText(500)]).toEqual(['10M', '7B', '1.5B', '500']);
  });
});

describe('route: model traits from the catalog', () => {
  const entry = (over: Partial<CatalogEntry>, kv: Record<string, unknown> = {}, paramCount?: number): CatalogEntry => ({
    name: 'm',
    path: '/x/m.gguf',
    source: 'svc',
    sizeBytes: 2_000_000_000,
    modifiedAt: new Date(0),
    capabilities: ['chat'],
    meta: { version: 3, tensorCount: 1, kv, paramCount },
    ...over,
  });

  it('reads tools, thinking, vocabulary size and names from metadata; vision from a projector layer', () => {
    const t = traitsOf(
      entry(
        { name: 'deepseek-coder-v2:16b', manifest: { schemaVersion: 2, layers: [{ mediaType: MEDIA_PROJECTOR, digest: 'sha256:0', size: 1 }] } as never },
        { 'tokenizer.chat_template': '{% if tools %}…{% endif %}<think>', 'tokenizer.ggml.tokens': { array: 8, length: 102_400 }, 'general.name': 'DeepSeek Coder' },
        15_700_000_000,
      ),
      8192,
    );
    expect(t).toEqual({ name: 'deepseek-coder-v2:16b', params: 15_700_000_000, context: 8192, vision: true, tools: true, thinks: true, vocab: 102_400, names: 'deepseek-coder-v2:16b deepseek coder' });
  });

  it('without a tensor count, parameters come from the file size and weight type', () => {
    expect(traitsOf(entry({}, { 'general.file_type': 1 }), 4096).params).toBe(1_000_000_000);
    expect(traitsOf(entry({}, { 'general.file_type': 15 }), 4096).params).toBe(Math.round(2e9 / 0.6));
  });

  it('ranks only chat models', () => {
    expect(isChatEntry(entry({}))).toBe(true);
    expect(isChatEntry(entry({ capabilities: ['completion'] }))).toBe(false);
    expect(isChatEntry(entry({ capabilities: ['embeddings'] }))).toBe(false);
  });
});
