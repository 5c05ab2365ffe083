import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NativeContext, NativeModel } from '../../libs/engine/src/backend/native-addon';
import { loadEngineModel } from './helpers/engine';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { withStringKv } from './helpers/gguf-edit';

jest.setTimeout(60_000);

/** What the addon does with values an HTTP request can bring to it (stories260K). */
describe('the native addon under hostile values', () => {
  let model: NativeModel;
  let ctx: NativeContext;
  beforeAll(async () => {
    model = await loadEngineModel(fixtureModel(STORIES));
    ctx = await model.createContext({ nCtx: 256, nBatch: 64, nUbatch: 64, nSeqMax: 4, nThreads: 1, nThreadsBatch: 1 });
  });
  afterAll(() => {
    ctx?.dispose();
    model?.dispose();
  });

  it('holds penalty windows to the context: repeat_last_n 2e9 allocated 8 GB on the JS thread (2e8 here: 800 MB)', () => {
    const rss = process.memoryUsage().rss;
    const t0 = performance.now();
    const s = ctx.createSampler({ temperature: 0, repeatPenalty: 1.1, repeatLastN: 2e8, dryMultiplier: 0.8, dryPenaltyLastN: 2e8, topK: 1e10 });
    expect(performance.now() - t0).toBeLessThan(200);
    expect(process.memoryUsage().rss - rss).toBeLessThan(64 << 20);
    s.dispose();
  });

  it('refuses seq -1 where llama.cpp would abort the process', () => {
    expect(() => ctx.seqPosMin(-1)).toThrow('seq -1 out of range');
    expect(() => ctx.seqPosMax(-1)).toThrow('seq -1 out of range');
    expect(ctx.seqPosMax(0)).toBe(-1);
  });

  it('refuses a sampler named by two sample requests of one step(): it would be sampled twice from one state', async () => {
    const s = ctx.createSampler({ temperature: 0.8, seed: 1 });
    const batch = { tokens: Int32Array.of(1, 2), pos: Int32Array.of(0, 0), seq: Int32Array.of(0, 1), logits: Uint8Array.of(1, 1) };
    try {
      let refused: Error | undefined;
      try {
        await ctx.step(batch, [{ index: 0, sampler: s, topLogprobs: 0 }, { index: 1, sampler: s, topLogprobs: 0 }]);
      } catch (err) {
        refused = err as Error;
      }
      expect(refused?.message).toBe('step: sample request 1 reuses the sampler of an earlier one');
      ctx.seqRemove(0, -1, -1);
      ctx.seqRemove(1, -1, -1);
      // Refused before anything ran: the sampler is free and the same batch steps with it once.
      const ok = await ctx.step(batch, [{ index: 0, sampler: s, topLogprobs: 0 }]);
      expect(ok.status).toBe(0);
    } finally {
      ctx.seqRemove(0, -1, -1);
      ctx.seqRemove(1, -1, -1);
      s.dispose();
    }
  });

  it('refuses an inverted repetition however its numbers and spaces are written', () => {
    for (const g of ['root ::= "a"{5,2}', 'root ::= "a"{5,0000000000000000002}', 'root ::= ("a"{5,\n2})', 'root ::= ("a"{5, # two\n 2})']) {
      expect(() => ctx.createSampler({ grammar: g })).toThrow(/repetition/);
    }
  });
});

describe('a reranker with a rerank template (as llama.cpp converts Qwen3-Reranker)', () => {
  it('fills the template once: a query full of "{document}" does not multiply the document', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'svc-rerank-tpl-')), 'rr.gguf');
    withStringKv(fixtureModel(STORIES), path, 'tokenizer.chat_template.rerank', 'Query: {query}\nDocument: {document}\nRelevant:');
    const model = await loadEngineModel(path);
    try {
      const doc = 'Once upon a time there was a cat. '.repeat(50);
      const [plain] = await model.rerankInputs('{query}', [doc]);
      const [hostile] = await model.rerankInputs('{document}'.repeat(200), [doc]);
      const docTokens = (await model.tokenize(doc, false, false)).length;
      // Two hundred literal "{document}" strings, tokenized: a few tokens each, never a document each.
      expect(hostile.length).toBeLessThan(plain.length + 200 * 8);
      expect(hostile.length).toBeLessThan(docTokens * 10);
      expect(model.detokenize(hostile, false)).toContain('{document}{document}');
    } finally {
      model.dispose();
    }
  });
});
