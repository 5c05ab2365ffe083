import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fixtureModel, ROOT, STORIES } from './helpers/fixtures';

/**
 * Attention windows (llama.cpp patch 0006): in the unified KV cache a step attends only
 * the span of cells its own sequences hold, not every cell up to the highest one in use,
 * so the cells of retained prompts and other requests cost a step nothing unless they lie
 * inside that span. What must hold: the window is that span (llama.cpp's KV debug log
 * prints it), a shared prefix far below a sequence's own cells stays inside it, and
 * every token is what the same request decodes alone in an empty cache.
 */
describe('attention windows in the unified KV cache', () => {
  const addon = join(ROOT, 'build', 'native', 'cpu', 'svc_engine.node');
  const script = `
    const addon = require(${JSON.stringify(addon)});
    (async () => {
      const model = await addon.loadModel(${JSON.stringify(fixtureModel(STORIES))});
      const windows = [];
      addon.setLogger((level, text) => {
        const m = /window \\[(\\d+), (\\d+)\\)/.exec(text);
        if (m) windows.push([+m[1], +m[2]]);
      });
      // Log lines come through their own queue: let them arrive before a phase is read.
      const settle = () => new Promise((r) => setTimeout(r, 50));
      const phase = async () => { await settle(); return windows.splice(0); };
      const story = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. ';
      const filler = model.tokenizeSync(story.repeat(40), true, false).slice(0, 512);
      const short = model.tokenizeSync('Once upon a time, a cat', true, false);
      let ctx = await model.createContext({ nCtx: 8192, nBatch: 512, nUbatch: 512, nSeqMax: 16, nThreads: 2, nThreadsBatch: 2 });
      const batch = (tokens, seq, from) => ({
        tokens: Int32Array.from(tokens), pos: Int32Array.from(tokens, (_, i) => from + i),
        seq: Int32Array.from(tokens, () => seq), logits: Uint8Array.from(tokens, (_, i) => (i === tokens.length - 1 ? 1 : 0)),
      });
      // Decodes tokens[from..] into seq (the cache already holds [0, from)), then n greedy tokens.
      async function generate(seq, tokens, from, n) {
        const smp = ctx.createSampler({ temperature: 0 });
        smp.acceptPrompt(Int32Array.from(tokens));
        let r = await ctx.step(batch(tokens.slice(from), seq, from), [{ index: tokens.length - from - 1, sampler: smp }]);
        const out = [r.tokens[0]];
        for (let i = 0; i < n - 1; i++) {
          r = await ctx.step(batch([out[out.length - 1]], seq, tokens.length + i), [{ index: 0, sampler: smp }]);
          if (r.status !== 0) throw new Error('step status ' + r.status);
          out.push(r.tokens[0]);
        }
        smp.dispose();
        return out;
      }
      const res = {};
      res.alone = await generate(0, short, 0, 24);
      res.aloneWindows = await phase();
      ctx.seqRemove(0, -1, -1);
      // Eight retained prompts of 512 tokens: cells [0, 4096).
      for (let s = 1; s <= 8; s++) {
        const r = await ctx.step(batch(filler, s, 0), []);
        if (r.status !== 0) throw new Error('step status ' + r.status);
      }
      await phase();
      res.after = await generate(9, short, 0, 24);
      res.afterWindows = await phase();
      ctx.seqRemove(9, -1, -1);
      // A request sharing the first 500 cells of sequence 1 (a prefix-cache hit), against the
      // same prompt decoded whole on a sequence of its own.
      ctx.seqCopy(1, 10, 0, 500);
      res.shared = await generate(10, filler, 500, 16);
      res.sharedWindows = await phase();
      ctx.seqRemove(10, -1, -1);
      for (let s = 1; s <= 8; s++) ctx.seqRemove(s, -1, -1);
      res.whole = await generate(11, filler, 0, 16);
      ctx.seqRemove(11, -1, -1);
      // A 12-cell hole between other sequences' cells: [0, 512) and [524, 1036) held, the
      // sequence between them removed.
      await ctx.step(batch(filler, 1, 0), []);
      await ctx.step(batch(filler.slice(0, 12), 2, 0), []);
      await ctx.step(batch(filler, 3, 0), []);
      ctx.seqRemove(2, -1, -1);
      await phase();
      res.placed = await generate(12, short, 0, 24);
      res.placedWindows = await phase();
      ctx.dispose();
      // No room above the used cells (2048 of them, all held but a 12-cell hole at 500 and a
      // 500-cell one at 600): the longest free run.
      ctx = await model.createContext({ nCtx: 2048, nBatch: 512, nUbatch: 512, nSeqMax: 16, nThreads: 2, nThreadsBatch: 2 });
      for (const [s, n] of [[1, 500], [2, 12], [3, 88], [4, 500], [5, 512], [6, 436]]) await ctx.step(batch(filler.slice(0, n), s, 0), []);
      ctx.seqRemove(2, -1, -1);
      ctx.seqRemove(4, -1, -1);
      await phase();
      res.full = await generate(12, short, 0, 24);
      res.fullWindows = await phase();
      ctx.dispose();
      addon.setLogger(null);
      console.log(JSON.stringify(res));
      process.exit(0);
    })().catch((e) => { console.error(e); process.exit(1); });`;

  type Out = {
    alone: number[]; after: number[]; shared: number[]; whole: number[]; placed: number[]; full: number[];
    aloneWindows: number[][]; afterWindows: number[][]; sharedWindows: number[][]; placedWindows: number[][]; fullWindows: number[][];
  };
  const run = (env: Record<string, string>): Out => {
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, ...env } });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    return JSON.parse(r.stdout.trim().split('\n').pop()!);
  };
  let on: Out;
  let off: Out;

  beforeAll(() => {
    on = run({ LLAMA_KV_CACHE_DEBUG: '1' });
    off = run({ LLAMA_KV_NO_WINDOW: '1' });
  }, 150_000);

  it('attends only the span of its own cells, not the retained prompts below them', () => {
    // 24 steps alone in an empty cache: cells [0, 34), one 256-cell block.
    expect(on.aloneWindows).toEqual(new Array(24).fill([0, 256]));
    // The same request above 4096 cells of other sequences: still one block, where its
    // cells are ([4096, 4130)), where the whole cache up to them would be [0, 4352).
    expect(on.afterWindows).toEqual(new Array(24).fill([4096, 4352]));
  });

  it('keeps a shared prefix inside the window', () => {
    // Cells [0, 500) shared with sequence 1, its own from 4096 on: the window spans both.
    expect(on.sharedWindows.length).toBe(16);
    for (const w of on.sharedWindows) expect(w).toEqual([0, 4352]);
  });

  it('starts a new sequence above the used cells and grows it after its own, not through holes between others', () => {
    // The search from the head would put its prompt in the 12-cell hole at 512 and its later
    // tokens past the cells above it, windows up to [512, 1280); placed above the used cells
    // (from 1036) it stays within one block.
    expect(on.placedWindows).toEqual(new Array(24).fill([1024, 1280]));
    expect(on.placed).toEqual(on.alone);
    // With no room above, the longest free run ([600, 1100)), not the first hole (12 cells at
    // 500, which the search from the head takes, and then cells past 600).
    expect(on.fullWindows).toEqual(new Array(24).fill([512, 768]));
    expect(on.full).toEqual(on.alone);
  });

  it('decodes the same tokens as alone, with windows or without', () => {
    expect(on.alone.length).toBe(24);
    expect(on.after).toEqual(on.alone);
    expect(on.shared).toEqual(on.whole);
    // Without windows (LLAMA_KV_NO_WINDOW) nothing is logged and the tokens are the same.
    expect(off.afterWindows).toEqual([]);
    expect(off.after).toEqual(on.alone);
    expect(off.shared).toEqual(on.shared);
    expect(off.whole).toEqual(on.whole);
    expect(off.placed).toEqual(on.alone);
    expect(off.full).toEqual(on.alone);
    // The requests differ (a check that cannot pass by decoding nothing).
    expect(on.shared).not.toEqual(on.alone.slice(0, 16));
  });
});
