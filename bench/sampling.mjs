#!/usr/bin/env node
// Engine-level comparison of sampling on the CPU against sampling in the compute graph
// (-backend-sampling), on one context shaped like the server's (unified KV cache,
// 256 sequence ids, -concurrency 8 × 8192 cells). No HTTP: the native addon alone.
//
//   node bench/sampling.mjs [--backend cpu|cuda] [--model PATH] [--threads N] [--reps 3] [--bound 16] [--out FILE]
//
// Per mode: greedy decode of one stream (ms per token, chains of 32 steps as the
// scheduler runs them), 8 streams in shared batches (tokens/s), and what the first
// step of a request costs on a sequence whose graph sampler is new (a chain set up for the
// graph; llama.cpp re-plans its graphs when the bound chains outgrow its node budget),
// taken over (same chain, another request) or absent (CPU mode).
// --bound: sequences given a graph sampler beforehand, as the retained prompts and
// finished requests of a running server leave them.
import fs from 'node:fs';
import path from 'node:path';
import { ensureModel } from '../test/fixtures/models.mjs';
import { engineOptions, loadAddon, median } from './lib/engine-cli.mjs';

const { opt, backend, threads, reps } = engineOptions(3);
const bound = Number(opt('--bound', '16'));
const modelPath = opt('--model', null) ?? (await ensureModel('qwen2-0.5b', { quiet: false }));
const addon = loadAddon(backend);
// llama.cpp logs its compute buffers each time it plans its graphs: the last size per
// buffer, and how many plans, tell what the mode costs in memory and in re-plans.
let buffers = {}, plans = 0;
addon.setLogger((level, text) => {
  const m = /(\S+) compute buffer size = +([0-9.]+) MiB/.exec(text);
  if (m) buffers[m[1]] = Number(m[2]);
  if (/sched_reserve: reserving [.]{3}/.test(text)) plans++;
});
const model = await addon.loadModel(modelPath, { nGpuLayers: -1 });
const prompt = model.tokenizeSync('The quick brown fox jumps over the lazy dog. Once upon a time', true, false);
const n0 = prompt.length;

const batchOf = (entries) => ({
  tokens: Int32Array.from(entries, (e) => e[0]),
  pos: Int32Array.from(entries, (e) => e[1]),
  seq: Int32Array.from(entries, (e) => e[2]),
  logits: Uint8Array.from(entries, (e) => (e[3] ? 1 : 0)),
});

// One request per sequence in `seqs`, decoded together: prompt, then `n` tokens.
// Returns the first step's ms and the decode's ms per step.
async function generate(ctx, seqs, n, samplerOpts = { temperature: 0 }) {
  const samplers = seqs.map(() => ctx.createSampler(samplerOpts));
  samplers.forEach((s) => s.acceptPrompt(prompt));
  for (const s of seqs) ctx.seqRemove(s, -1, -1);
  const entries = seqs.flatMap((s) => Array.from(prompt, (t, p) => [t, p, s, p === n0 - 1]));
  let t0 = performance.now();
  let r = await ctx.step(batchOf(entries), seqs.map((_, i) => ({ index: (i + 1) * n0 - 1, sampler: samplers[i] })));
  const firstMs = performance.now() - t0;
  let done = 1;
  const tokens = [Array.from(r.tokens)];
  t0 = performance.now();
  while (done < n) {
    const last = r.tokens.slice(-seqs.length);
    const chain = Math.min(32, n - done);
    r = await ctx.step(batchOf(seqs.map((s, i) => [last[i], n0 + done - 1, s, true])),
      seqs.map((_, i) => ({ index: i, sampler: samplers[i], budget: chain })), { maxSteps: chain });
    if (r.status !== 0) throw new Error(`step status ${r.status}`);
    tokens.push(Array.from(r.tokens));
    done += r.steps;
  }
  const stepMs = (performance.now() - t0) / (n - 1);
  samplers.forEach((s) => s.dispose());
  return { firstMs, stepMs, tokens: tokens.flat() };
}

async function measure(graph) {
  buffers = {};
  plans = 0;
  const ctx = await model.createContext({ nCtx: 8192 * 8, nBatch: 2048, nUbatch: 512, nSeqMax: 256, nThreads: threads, nThreadsBatch: threads, backendSampling: graph });
  // Warm-up, and the sequences a running server leaves with graph samplers.
  await generate(ctx, [0], 16);
  for (let s = 1; s <= bound; s++) await generate(ctx, [100 + s], 2);
  const single = [], agg = [], taken = [], fresh = [], changed = [];
  let text;
  for (let r = 0; r < reps; r++) {
    const one = await generate(ctx, [0], 128);
    single.push(one.stepMs);
    text ??= one.tokens;
    const eight = await generate(ctx, [0, 1, 2, 3, 4, 5, 6, 7], 64);
    agg.push((8 * 1000) / eight.stepMs);
    taken.push((await generate(ctx, [0], 2)).firstMs);
    fresh.push((await generate(ctx, [200 + r], 2)).firstMs);
    changed.push((await generate(ctx, [0], 2, { temperature: 0, topK: 20 + r })).firstMs);
  }
  ctx.dispose();
  await new Promise((r) => setTimeout(r, 50)); // the last log lines
  const f = (x) => +x.toFixed(3);
  return {
    decode_ms_per_token: f(median(single)), decode_all: single.map(f),
    agg8_tps: +median(agg).toFixed(1),
    first_step_ms: { same_chain_taken_over: f(median(taken)), new_sequence: f(median(fresh)), chain_changed: f(median(changed)) },
    greedy: text,
    compute_buffer_mib: { ...buffers },
    plans,
  };
}

const cpu = await measure(false);
const graph = await measure(true);
// Both modes pick the argmax of the same logits: the greedy tokens must agree.
const sameTokens = cpu.greedy.join() === graph.greedy.join();
delete cpu.greedy;
delete graph.greedy;
const doc = { sameTokens, date: new Date().toISOString(), backend, model: path.basename(modelPath), threads, reps, bound, cpu, graph,
  ratio: { decode: +(cpu.decode_ms_per_token / graph.decode_ms_per_token).toFixed(3), agg8: +(graph.agg8_tps / cpu.agg8_tps).toFixed(3) } };
const out = opt('--out', null);
if (out) fs.writeFileSync(out, JSON.stringify(doc, null, 1) + '\n');
for (const [name, m] of [['cpu  ', cpu], ['graph', graph]]) {
  console.log(`${name} decode ${m.decode_ms_per_token} ms/token (${m.decode_all.join(', ')}), 8 streams ${m.agg8_tps} t/s, ` +
    `first step: taken over ${m.first_step_ms.same_chain_taken_over} ms, new sequence ${m.first_step_ms.new_sequence} ms, chain changed ${m.first_step_ms.chain_changed} ms; ` +
    `graphs planned ${m.plans} times, compute buffers ${Object.entries(m.compute_buffer_mib).map(([k, v]) => `${k} ${v} MiB`).join(', ')}`);
}
console.log(`greedy tokens equal in both modes: ${sameTokens}`);
console.log(`graph/cpu: decode ${doc.ratio.decode}x, 8 streams ${doc.ratio.agg8}x`);
process.exit(0);
