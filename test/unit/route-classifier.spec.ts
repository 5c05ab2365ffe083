import { EmbedRequest, EmbedResult, EmbeddingService } from '../../libs/engine/src/embeddings/embedding.service';
import { TEXT_CATEGORIES, TextCategory } from '../../libs/route/src/categories';
import { ClassifierEncoder, isMiniLm } from '../../libs/route/src/classify/classifier-encoder';
import { centroidsOf, nearestCentroid } from '../../libs/route/src/classify/embedding-classifier';
import { TRAINING_EXAMPLES } from '../../libs/route/src/classify/training-examples';
import { CatalogEntry, ModelCatalog } from '../../libs/store/src/catalog';
import { HELD_OUT } from '../fixtures/route-heldout';

/**
 * The embedding classifier's mechanics, with a stand-in encoder: hashed words and character
 * trigrams (so other scripts count). Its accuracy says the centroids, the nearest-centroid
 * choice and the data work together; it is NOT all-minilm's accuracy, which only the real
 * encoder can measure (test/e2e/route.e2e-spec.ts with SVC_ALLMINILM).
 */
const DIMS = 512;
function hashed(text: string): Float32Array {
  const v = new Float32Array(DIMS);
  const bump = (s: string, w: number) => {
    let h = 2166136261;
    for (const ch of s) h = Math.imul(h ^ ch.codePointAt(0)!, 16777619);
    v[(h >>> 0) % DIMS] += w;
  };
  const lower = text.toLowerCase();
  for (const w of lower.match(/[\p{L}\p{N}]+/gu) ?? []) bump(w, 1);
  const chars = [...lower];
  for (let i = 0; i + 3 <= chars.length; i++) bump(chars.slice(i, i + 3).join(''), 0.3);
  return v;
}

const training = () => TEXT_CATEGORIES.flatMap((category) => TRAINING_EXAMPLES[category].map((text) => ({ category, vector: hashed(text) })));

describe('route: embedding classifier (nearest centroid)', () => {
  it('has tens of training examples per text category, none of them held out', () => {
    for (const c of TEXT_CATEGORIES) expect(TRAINING_EXAMPLES[c].length).toBeGreaterThanOrEqual(20);
    const train = new Set(TEXT_CATEGORIES.flatMap((c) => TRAINING_EXAMPLES[c]));
    expect(HELD_OUT.filter(([, t]) => train.has(t))).toEqual([]);
    for (const c of TEXT_CATEGORIES) expect(HELD_OUT.filter(([k]) => k === c).length).toBe(10);
  });

  it('centroids are unit vectors, one per category; similarities come best first; confidence is a probability', () => {
    const c = centroidsOf(training());
    expect(c.categories).toEqual([...TEXT_CATEGORIES]);
    for (const v of c.vectors) expect(Math.hypot(...v)).toBeCloseTo(1, 5);
    const r = nearestCentroid(c, hashed('Write a Python function that parses JSON.'));
    expect(r.similarities.map((s) => s.cosine)).toEqual([...r.similarities.map((s) => s.cosine)].sort((a, b) => b - a));
    expect(r.category).toBe(r.similarities[0].category);
    expect(r.confidence).toBeGreaterThan(1 / TEXT_CATEGORIES.length);
    expect(r.confidence).toBeLessThanOrEqual(1);
  });

  it('a vector equal to a centroid is that category, whatever its length', () => {
    const c = centroidsOf(training());
    const k = c.categories.indexOf('reasoning');
    expect(nearestCentroid(c, c.vectors[k].map((x) => x * 7)).category).toBe('reasoning');
  });

  it('reports the mechanics accuracy on the held-out prompts with the stand-in encoder (not all-minilm)', () => {
    const c = centroidsOf(training());
    const right = HELD_OUT.filter(([cat, text]) => nearestCentroid(c, hashed(text)).category === cat).length;
    // eslint-disable-next-line no-console
    console.log(`nearest centroid over hashed words and trigrams (a stand-in, not all-minilm): ${right}/${HELD_OUT.length} held-out prompts`);
    // Far above chance (1 in 5): the pieces fit together.
    expect(right / HELD_OUT.length).toBeGreaterThan(0.4);
  });
});

describe('route: the classifier encoder', () => {
  const entry = (name: string, over: Partial<CatalogEntry> = {}, kv: Record<string, unknown> = {}): CatalogEntry => ({
    name,
    path: `/m/${name}.gguf`,
    source: 'svc',
    sizeBytes: 1,
    modifiedAt: new Date(0),
    capabilities: ['embeddings'],
    meta: { version: 3, tensorCount: 1, kv: { 'general.architecture': 'bert', ...kv } },
    ...over,
  });

  it('knows all-minilm by store name, file name or metadata name, and only as an encoder that writes vectors', () => {
    expect(isMiniLm(entry('all-minilm:l6-v2'))).toBe(true);
    expect(isMiniLm(entry('x', { path: '/m/All-MiniLM-L6-v2.Q8_0.gguf' }))).toBe(true);
    expect(isMiniLm(entry('x', {}, { 'general.name': 'all-MiniLM-L6-v2' }))).toBe(true);
    expect(isMiniLm(entry('x', {}, { 'general.basename': 'all-minilm' }))).toBe(true);
    expect(isMiniLm(entry('bge-small'))).toBe(false);
    expect(isMiniLm(entry('all-minilm-chat', { capabilities: ['chat'] }))).toBe(false);
    expect(isMiniLm(entry('all-minilm-rerank', {}, { 'bert.pooling_type': 4 }))).toBe(false);
  });

  const catalog = (flag: string | undefined, list: CatalogEntry[]) =>
    ({
      encoderName: () => flag,
      list: () => list,
      resolve: (n: string) => {
        const hit = list.find((e) => e.name === n);
        if (!hit) throw new Error(`no model named ${n}`);
        return hit;
      },
    }) as unknown as ModelCatalog;

  it('takes -embed when it is all-minilm, else the stores\' copy, else none', () => {
    const flagged = entry('all-minilm', { source: 'file' });
    const stored = entry('all-minilm:latest', { source: 'ollama', path: '/o/blobs/sha256-1' });
    const other = entry('bge-small', { source: 'file' });
    const none = {} as EmbeddingService;
    expect(new ClassifierEncoder(catalog('all-minilm', [flagged, stored]), none).find()).toBe(flagged);
    expect(new ClassifierEncoder(catalog('bge-small', [other, stored]), none).find()).toBe(stored);
    expect(new ClassifierEncoder(catalog('bge-small', [other]), none).find()).toBeUndefined();
    expect(new ClassifierEncoder(catalog(undefined, [stored]), none).find()).toBe(stored);
    expect(new ClassifierEncoder(catalog(undefined, []), none).find()).toBeUndefined();
  });

  it('trains the centroids once per weights and classifies with them', async () => {
    let hash = 'a';
    const calls: number[] = [];
    const embeddings = {
      embed: async (req: EmbedRequest): Promise<EmbedResult> => {
        calls.push(req.inputs.length);
        return { model: req.model, encoder: { contentHash: hash } as never, vectors: req.inputs.map(hashed), promptTokens: 0, loaded: false };
      },
    } as unknown as EmbeddingService;
    const minilm = entry('all-minilm');
    const enc = new ClassifierEncoder(catalog('all-minilm', [minilm]), embeddings);
    const examples = TEXT_CATEGORIES.reduce((n, c) => n + TRAINING_EXAMPLES[c].length, 0);
    const first = await enc.classify(minilm, 'Prove that the sum of two even numbers is even.');
    expect(calls).toEqual([1, examples]);
    const again = await enc.classify(minilm, 'Prove that the sum of two even numbers is even.');
    expect(again).toEqual(first);
    expect(calls).toEqual([1, examples, 1]);
    hash = 'b'; // the store's copy replaced by other weights: trained again
    await enc.classify(minilm, 'hello');
    expect(calls).toEqual([1, examples, 1, 1, examples]);
    expect((TEXT_CATEGORIES as readonly TextCategory[]).includes(first.category)).toBe(true);
  });
});
