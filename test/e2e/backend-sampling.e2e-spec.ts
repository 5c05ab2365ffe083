import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import OpenAI from 'openai';
import { fixtureModel, ROOT, STORIES, syntheticModel } from './helpers/fixtures';
import { RunningServer, startServer } from './helpers/server';

/**
 * Sampling in the compute graph (-backend-sampling; llama.cpp's backend sampling). The
 * GPU is where it pays (auto), but the CPU backend runs the same graph ops, so the
 * bookkeeping around it (a clone per sequence, taken over or rebound between requests,
 * dropped for entries that want raw logits) is checked here against CPU sampling.
 */
describe('backend sampling', () => {
  describe('the engine', () => {
    const addon = join(ROOT, 'build', 'native', 'cpu', 'svc_engine.node');
    const warmup = join(ROOT, 'dist', 'libs', 'engine', 'src', 'models', 'graph-sampler-warmup.js');
    // Each scenario: requests run one after another on the given sequences of one
    // context; every request decodes its prompt, then `n` tokens for all its sequences
    // in shared batches. What each produced, and whether logits() answered after it.
    const script = (model: string) => `
      const addon = require(${JSON.stringify(addon)});
      (async () => {
        const model = await addon.loadModel(${JSON.stringify(model)});
        const prompt = model.tokenizeSync('Once upon a time', true, false);
        const n0 = prompt.length;
        async function session(graph, requests, graphSamplerSlots = 32) {
          const ctx = await model.createContext({ nCtx: 2048, nBatch: 512, nUbatch: 512, nSeqMax: 8, nThreads: 2, nThreadsBatch: 2, backendSampling: graph, graphSamplerSlots });
          const results = [];
          const pool = new Map();
          for (const rq of requests) {
            const seqs = rq.seqs;
            // reuse: the previous request's sampler of that sequence, reset (as the scheduler's pool does).
            const samplers = seqs.map((s) => {
              const old = pool.get(s);
              if (rq.reuse && old) { old.reset(); old.acceptPrompt(prompt); return old; }
              const x = ctx.createSampler(rq.opts); x.acceptPrompt(prompt); pool.set(s, x); return x;
            });
            for (const s of seqs) ctx.seqRemove(s, -1, -1);
            const tokens = [], pos = [], seq = [], lg = [];
            for (const s of seqs) prompt.forEach((t, p) => { tokens.push(t); pos.push(p); seq.push(s); lg.push(rq.allRows || p === n0 - 1 ? 1 : 0); });
            let b = { tokens: Int32Array.from(tokens), pos: Int32Array.from(pos), seq: Int32Array.from(seq), logits: Uint8Array.from(lg) };
            let idx = seqs.map((_, i) => (i + 1) * n0 - 1);
            const out = seqs.map(() => []), lps = [];
            let promptRow = null;
            for (let k = 0; k < rq.n; k++) {
              const r = await ctx.step(b, seqs.map((s, i) => ({ index: idx[i], sampler: samplers[i], topLogprobs: rq.top || 0 })));
              if (r.status !== 0) throw new Error('step status ' + r.status);
              if (k === 0 && rq.allRows) promptRow = Array.from(ctx.logits(0).slice(0, 4));
              seqs.forEach((_, i) => out[i].push(r.tokens[i]));
              if (rq.top) lps.push(r.logprobs[0] && r.logprobs[0].top.length);
              b = { tokens: Int32Array.from(seqs, (_, i) => r.tokens[i]), pos: Int32Array.from(seqs, () => n0 + k), seq: Int32Array.from(seqs), logits: Uint8Array.from(seqs, () => 1) };
              idx = seqs.map((_, i) => i);
            }
            let logits = true;
            try { ctx.logits(0); } catch (e) { logits = /no logits/.test(e.message) ? false : e.message; }
            results.push({ texts: out.map((o) => model.detokenize(Int32Array.from(o), false)), logits, lps, promptRow });
          }
          const on = ctx.backendSampling;
          ctx.dispose();
          return { on, results };
        }
        const greedy = { temperature: 0 };
        // Penalties, and a ban on the token greedy sampling takes first: a text of its own.
        const first = (await session(false, [{ seqs: [0], opts: greedy, n: 1 }])).results[0].texts[0];
        const banned = model.tokenizeSync(first, false, false);
        const penalized = { temperature: 0, repeatPenalty: 1.5, repeatLastN: 16, logitBias: [[banned[banned.length - 1], -100]] };
        const plan = [
          { seqs: [0, 1], opts: greedy, n: 24 },
          { seqs: [0], opts: greedy, n: 12, reuse: true },        // same chain: the bound clone takes the state over
          { seqs: [0], opts: penalized, n: 24 },                 // another chain on that sequence: rebound
          { seqs: [2], opts: greedy, n: 8, top: 3 },             // top logprobs: raw logits, sampled on the CPU
          { seqs: [0], opts: greedy, n: 12 },                    // back in the graph after a CPU-sampled request
          { seqs: [3], opts: { temperature: 0, grammar: 'root ::= [a-z ]+' }, n: 8 },
          { seqs: [0], opts: greedy, n: 8, allRows: true },      // logits for every prompt row (prompt logprobs): raw logits first
          { seqs: [1], opts: greedy, n: 8 },                     // with one slot: takes it from sequence 0
          { seqs: [0], opts: greedy, n: 8 },                     // and back
          { seqs: [4], opts: { temperature: 0, dryMultiplier: 0.8, dryAllowedLength: 2 }, n: 16 }, // DRY: a chain the graph runs in part
        ];
        const seeded = [{ seqs: [0], opts: { temperature: 0.9, seed: 7 }, n: 24 }, { seqs: [0], opts: { temperature: 0.9, seed: 7 }, n: 24 }];
        // llama.cpp re-plans every graph (sched_reserve, 40-70 ms on a GPU) when told to; with
        // patch 0004 binding or dropping a chain does so only when the node budget must grow.
        // 40 sequences bound one after another, one dropped (top logprobs), one rebound.
        // With warm: the server's load-time warm-up first (libs/engine graph-sampler-warmup),
        // then requests with three configurations in turn.
        async function replans(warm) {
          let n = 0;
          addon.setLogger((level, text) => { if (/sched_reserve: reserving [.]{3}/.test(text)) n++; });
          const ctx = await model.createContext({ nCtx: 2048, nBatch: 512, nUbatch: 512, nSeqMax: 64, nThreads: 2, nThreadsBatch: 2, backendSampling: true, graphSamplerSlots: 64 });
          await new Promise((r) => setTimeout(r, 50));
          let atCreation = n, warmed = 0;
          if (warm) {
            warmed = await require(${JSON.stringify(warmup)}).warmGraphSamplers(ctx, 64, 4, 1);
            await new Promise((r) => setTimeout(r, 50));
            atCreation = n;
          }
          const configs = warm ? [greedy, { temperature: 1, seed: 3 }, { temperature: 0.8, topK: 40, topP: 0.9, seed: 3 }] : [greedy];
          const texts = [];
          const one = async (s, opts, top = 0) => {
            const smp = ctx.createSampler(opts); smp.acceptPrompt(prompt);
            ctx.seqRemove(s, -1, -1);
            const b = { tokens: Int32Array.from(prompt), pos: Int32Array.from(prompt, (_, p) => p), seq: Int32Array.from(prompt, () => s), logits: Uint8Array.from(prompt, (_, p) => (p === n0 - 1 ? 1 : 0)) };
            const r = await ctx.step(b, [{ index: n0 - 1, sampler: smp, topLogprobs: top }]);
            if (r.status !== 0) throw new Error('step status ' + r.status);
            texts.push(model.detokenize(Int32Array.from([r.tokens[0]]), false));
            smp.dispose();
          };
          for (let s = 0; s < 40; s++) await one(s, configs[s % configs.length]);
          await one(5, greedy, 3);
          await one(0, { temperature: 0, topK: 7 });
          ctx.dispose();
          await new Promise((r) => setTimeout(r, 50));
          addon.setLogger(null);
          return { atCreation, warmed, afterCreation: n - atCreation, texts };
        }
        console.log(JSON.stringify({
          cpu: await session(false, plan), graph: await session(true, plan), seeded: await session(true, seeded),
          // One chain bound at a time: a two-sequence batch samples its second sequence on the
          // CPU, and every other sequence's request takes the binding from the last one.
          oneSlot: await session(true, plan, 1),
          replans: await replans(false),
          warmReplans: await replans(true),
        }));
        process.exit(0);
      })().catch((e) => { console.error(e); process.exit(1); });`;

    type Replans = { atCreation: number; warmed: number; afterCreation: number; texts: string[] };
    type Session = { on: boolean; results: Array<{ texts: string[]; logits: boolean | string; lps: number[]; promptRow: number[] | null }> };
    let out: { cpu: Session; graph: Session; seeded: Session; oneSlot: Session; replans: Replans; warmReplans: Replans };

    beforeAll(() => {
      const r = spawnSync(process.execPath, ['-e', script(fixtureModel(STORIES))], { encoding: 'utf8', timeout: 120_000 });
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
      out = JSON.parse(r.stdout.trim());
    }, 150_000);

    it('samples what the CPU samples: greedy, penalties and logit bias, on shared batches and across requests', () => {
      expect(out.cpu.on).toBe(false);
      expect(out.graph.on).toBe(true);
      const texts = (s: Session) => s.results.map((r) => r.texts);
      expect(texts(out.graph)).toEqual(texts(out.cpu));
      expect(texts(out.oneSlot)).toEqual(texts(out.cpu));
      // The plan's requests really differ (a check that cannot pass by sampling nothing).
      expect(out.cpu.results[0].texts[0]).toMatch(/^, there was a little girl named Lily/);
      expect(out.cpu.results[2].texts[0]).not.toBe(out.cpu.results[0].texts[0]);
      expect(out.cpu.results[5].texts[0]).toMatch(/^[a-z ]+$/);
    });

    it('leaves no raw logits for entries sampled in the graph; top logprobs still come, sampled on the CPU', () => {
      expect(out.cpu.results.map((r) => r.logits)).toEqual([true, true, true, true, true, true, true, true, true, true]);
      // Requests 3 (top logprobs) and 5 (a grammar) are sampled on the CPU, over raw logits.
      expect(out.graph.results.map((r) => r.logits)).toEqual([false, false, false, true, false, true, false, false, false, false]);
      expect(out.oneSlot.results.map((r) => r.logits)).toEqual([false, false, false, true, false, true, false, false, false, false]);
      expect(out.graph.results[3].lps).toEqual(new Array(8).fill(3));
      // A step with logits for every prompt row leaves them all, sampled on the CPU; the
      // request's next steps go back to the graph.
      expect(out.graph.results[6].promptRow).toEqual(out.cpu.results[6].promptRow);
      expect(out.graph.results[6].promptRow!.length).toBe(4);
    });

    it('re-plans its graphs only when bound chains outgrow the node budget, not per chain bound or dropped', () => {
      // Creating the context plans once; the first chain bound re-plans (a budget with room
      // for twice the chains), then only when their number doubles: at the 1st, 3rd, 7th,
      // 15th and 31st of 40; dropping one (top logprobs) and rebinding one (top-k) do not.
      expect(out.replans.atCreation).toBeGreaterThanOrEqual(1);
      expect(out.replans.afterCreation).toBe(5);
      // Every one of the 42 requests sampled the greedy first token ("," of ", there was ...").
      expect(out.replans.texts).toEqual(new Array(42).fill(','));
    });

    it('plans at load for the chains a server binds (the warm-up), then not at all', () => {
      // The 64 slots bound 4 at a time: plans at 4, 12, 28 and 60 chains, all at load.
      expect(out.warmReplans.warmed).toBe(64);
      expect(out.warmReplans.atCreation).toBeGreaterThanOrEqual(2);
      // 40 sequences with three configurations in turn, one dropped, one rebound: no re-plan.
      expect(out.warmReplans.afterCreation).toBe(0);
      expect(out.warmReplans.texts.length).toBe(42);
      expect(out.warmReplans.texts.filter((t, i) => i % 3 === 0 && i < 40)).toEqual(new Array(14).fill(','));
    });

    it('adds a row per sampled sequence to the compute buffer, not a copy of every output row', () => {
      // llama.cpp sized its worst-case graph with a padded copy of all n_ubatch output rows
      // when a chain was bound: 512 x 151936 floats (297 MiB) more, on the GPU where it
      // matters (patch 0005). The CPU backend's buffer is planned the same way.
      const sizes = `
        const addon = require(${JSON.stringify(addon)});
        (async () => {
          const sizes = [];
          addon.setLogger((level, text) => { const m = /CPU compute buffer size = +([0-9.]+) MiB/.exec(text); if (m) sizes.push(+m[1]); });
          const model = await addon.loadModel(${JSON.stringify(syntheticModel('qwen2-tiny'))});
          const ctx = await model.createContext({ nCtx: 2048, nBatch: 512, nUbatch: 512, nSeqMax: 16, nThreads: 2, nThreadsBatch: 2, backendSampling: true, graphSamplerSlots: 16 });
          const opts = { temperature: 0.8, topK: 40, topP: 0.9, repeatPenalty: 1.1 };
          const [a, b] = [ctx.createSampler(opts), ctx.createSampler(opts)];
          const r = await ctx.step({ tokens: Int32Array.of(1, 2), pos: Int32Array.of(0, 0), seq: Int32Array.of(0, 1), logits: Uint8Array.of(1, 1) }, [{ index: 0, sampler: a }, { index: 1, sampler: b }]);
          await new Promise((res) => setTimeout(res, 50));
          console.log(JSON.stringify({ status: r.status, sizes }));
          process.exit(0);
        })().catch((e) => { console.error(e); process.exit(1); });`;
      const r = spawnSync(process.execPath, ['-e', sizes], { encoding: 'utf8', timeout: 60_000 });
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
      const got = JSON.parse(r.stdout.trim()) as { status: number; sizes: number[] };
      expect(got.status).toBe(0);
      // Planned at creation (no chain), then again with the two chains bound.
      expect(got.sizes.length).toBe(2);
      const [base, bound] = got.sizes;
      expect(base).toBeGreaterThan(250); // the 512 output rows' logits themselves
      expect(bound).toBeLessThan(base * 1.1);
    }, 180_000);

    it('repeats a seeded sampling exactly', () => {
      const [a, b] = out.seeded.results.map((r) => r.texts[0]);
      expect(a).toBe(b);
      expect(a.length).toBeGreaterThan(0);
    });
  });

  describe('the server', () => {
    const servers: RunningServer[] = [];
    afterAll(async () => {
      await Promise.all(servers.map((s) => s.stop()));
    });

    it('-backend-sampling on answers what off answers (greedy completions, streamed chat, logprobs)', async () => {
      const model = syntheticModel('qwen2-tiny');
      const [on, off] = await Promise.all([
        startServer(['-m', model, '-threads', '2', '-backend-sampling', 'on']),
        startServer(['-m', model, '-threads', '2']),
      ]);
      servers.push(on, off);
      // Every chain slot (2 x (4 + 8) + 16 with the defaults) bound at load: the warm-up ran.
      expect(on.logs()).toMatch(/sampling in the compute graph \(40 chains planned at load\)/);
      // auto on the CPU backend: sampled on the CPU.
      expect(off.logs()).not.toMatch(/sampling in the compute graph/);
      const ask = async (srv: RunningServer) => {
        const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
        const prompts = ['Once upon a time', 'The capital of France is', 'def add(a, b):'];
        const completions = await Promise.all(
          prompts.map((p) => client.completions.create({ model: '', prompt: p, max_tokens: 20, temperature: 0, frequency_penalty: 0.5 })),
        );
        const stream = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 16, temperature: 0, stream: true });
        let chat = '';
        for await (const c of stream) chat += c.choices[0]?.delta?.content ?? '';
        const lp = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 2 });
        return { texts: completions.map((c) => c.choices[0].text), chat, lp: lp.choices[0].logprobs!.content!.map((t) => [t.token, t.top_logprobs.length]) };
      };
      const [a, b] = [await ask(on), await ask(off)];
      expect(a).toEqual(b);
      expect(a.texts.every((t) => t.length > 0)).toBe(true);
    }, 180_000);
  });
});
