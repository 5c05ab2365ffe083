#!/usr/bin/env node
// Engine-level cost of other sequences' cells in the unified KV cache (retained
// prompts, other requests) for a new request, with llama.cpp's attention window
// (patch 0006: a ubatch attends only its own sequences' span of cells) and
// without it (LLAMA_KV_NO_WINDOW=1, every cell up to the highest used one).
// No HTTP: the native addon alone, on a context shaped like the server's (unified
// KV cache, 256 sequence ids, 8 × 8192 cells).
//
//   node bench/resident.mjs [--backend cpu|cuda] [--model PATH] [--threads N] [--reps 5] [--resident 8x512] [--out FILE]
//
// Per mode and layout: a 10-token prompt step (as a short request's first token),
// a ~550-token prefill, and greedy decode ms per token of one stream; "none" has no
// other cells, "below" has `--resident` retained sequences in the cells before the
// request's, "around" also has as many after them (placed once the request's prompt
// was decoded). Greedy tokens must be equal in every layout and mode.
import fs from 'node:fs';
import path from 'node:path';
import { realModel } from '../test/fixtures/models.mjs';
import { engineOptions, loadAddon, median } from './lib/engine-cli.mjs';

const { opt, backend, threads, reps } = engineOptions(5);
const [nResident, residentLen] = opt('--resident', '8x512').split('x').map(Number);
// Default: stories260K from the fixtures folder (test/fixtures/models.mjs: $SVC_MODELS_DIR or ../shared/models).
const modelPath = opt('--model', null) ?? (await realModel('stories260K.gguf'));
const addon = loadAddon(backend);
const model = await addon.loadModel(modelPath, { nGpuLayers: -1 });
const story = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. ';
const shortPrompt = model.tokenizeSync('Once upon a time, a cat', true, false).slice(0, 10);
const longPrompt = model.tokenizeSync(story.repeat(40), true, false).slice(0, 550);
const filler = model.tokenizeSync(story.repeat(Math.ceil(residentLen / 16) + 8), true, false).slice(0, residentLen);

const batchOf = (tokens, seq, from = 0) => ({
  tokens: Int32Array.from(tokens),
  pos: Int32Array.from(tokens, (_, i) => from + i),
  seq: Int32Array.from(tokens, () => seq),
  logits: Uint8Array.from(tokens, (_, i) => (i === tokens.length - 1 ? 1 : 0)),
});

/** Decodes `tokens` into `seq` in steps of at most 512; returns the ms of the whole prompt. */
async function prefill(ctx, seq, tokens, sampler) {
  const t0 = performance.now();
  let r;
  for (let at = 0; at < tokens.length; at += 512) {
    const part = tokens.slice(at, at + 512);
    const last = at + part.length >= tokens.length;
    const b = batchOf(part, seq, at);
    if (!last) b.logits.fill(0);
    r = await ctx.step(b, last && sampler ? [{ index: part.length - 1, sampler }] : []);
    if (r.status !== 0) throw new Error(`step status ${r.status}`);
  }
  return { ms: performance.now() - t0, token: r.tokens[0], row: tokens.length - 1 - Math.floor((tokens.length - 1) / 512) * 512 };
}

/** Largest logit minus the runner-up: how near a greedy choice was to flipping. */
function margin(logits) {
  let a = -Infinity, b = -Infinity;
  for (const v of logits) if (v > a) { b = a; a = v; } else if (v > b) b = v;
  return a - b;
}

async function fill(ctx, seqs) {
  for (const s of seqs) await prefill(ctx, s, filler);
}

async function measure(ctx, layout) {
  const below = Array.from({ length: nResident }, (_, i) => 100 + i);
  const after = Array.from({ length: nResident }, (_, i) => 150 + i);
  if (layout !== 'none') await fill(ctx, below);
  const out = { short: [], prefill: [], decode: [], tokens: null, logits: null, margins: [] };
  for (let k = 0; k < reps; k++) {
    const sampler = ctx.createSampler({ temperature: 0 });
    ctx.seqRemove(1, -1, -1);
    out.short.push((await prefill(ctx, 1, shortPrompt, sampler)).ms);
    ctx.seqRemove(1, -1, -1);
    sampler.reset();
    const p = await prefill(ctx, 1, longPrompt, sampler);
    out.prefill.push(p.ms);
    // the prompt's output row, kept to tell rounding from a wrong cell set between modes
    if (k === 0) out.logits = Float32Array.from(ctx.logits(p.row));
    if (layout === 'around' && k === 0) await fill(ctx, after);
    // greedy decode of 64 tokens, one step at a time
    const tokens = [p.token];
    const t0 = performance.now();
    for (let i = 0; i < 64; i++) {
      const r = await ctx.step(batchOf([tokens.at(-1)], 1, longPrompt.length + i), [{ index: 0, sampler }]);
      if (r.status !== 0) throw new Error(`step status ${r.status}`);
      tokens.push(r.tokens[0]);
      if (k === 0) out.margins.push(margin(ctx.logits(0)));
    }
    out.decode.push((performance.now() - t0) / 64);
    out.tokens = tokens;
    sampler.dispose();
  }
  for (const s of [...below, ...after, 1]) ctx.seqRemove(s, -1, -1);
  return { short_ms: median(out.short), prefill_ms: median(out.prefill), decode_ms: median(out.decode), tokens: out.tokens, logits: out.logits, margins: out.margins };
}

const results = [];
for (const mode of ['window', 'no-window']) {
  if (mode === 'no-window') process.env.LLAMA_KV_NO_WINDOW = '1';
  else delete process.env.LLAMA_KV_NO_WINDOW;
  const ctx = await model.createContext({ nCtx: 8192 * 8, nBatch: 2048, nUbatch: 512, nSeqMax: 256, nThreads: threads, nThreadsBatch: threads });
  // warm-up: graphs planned, pages touched
  await measure(ctx, 'none');
  for (const layout of ['none', 'below', 'around']) {
    const r = await measure(ctx, layout);
    results.push({ mode, layout, ...r });
    console.log(`${mode.padEnd(9)} ${layout.padEnd(6)}: 10-token step ${r.short_ms.toFixed(3)} ms, ${longPrompt.length}-token prefill ${r.prefill_ms.toFixed(2)} ms, decode ${r.decode_ms.toFixed(3)} ms/token`);
  }
  ctx.dispose();
}
const ref = results[0].tokens.join(',');
const same = results.every((r) => r.tokens.join(',') === ref);
console.log(`greedy tokens equal in every layout and mode: ${same}`);
// Where they differ: the first differing token, the top-two margin the reference had
// just before it, and the largest difference of the prompt's logits from the reference's.
for (const r of results.slice(1)) {
  const d = r.tokens.findIndex((t, i) => t !== results[0].tokens[i]);
  let maxDiff = 0;
  for (let i = 0; i < r.logits.length; i++) maxDiff = Math.max(maxDiff, Math.abs(r.logits[i] - results[0].logits[i]));
  const at = d < 0 ? 'equal' : `first differs at token ${d} (reference margin there ${d === 0 ? margin(results[0].logits).toExponential(2) : results[0].margins[d - 1].toExponential(2)})`;
  console.log(`  ${r.mode} ${r.layout}: ${at}; prompt logits max |diff| ${maxDiff.toExponential(2)}`);
}
const outFile = opt('--out', null);
if (outFile) fs.writeFileSync(outFile, JSON.stringify({ model: path.basename(modelPath), backend, threads, reps, resident: `${nResident}x${residentLen}`, results: results.map(({ tokens, logits, margins, ...r }) => r), same }, null, 2));
if (!same) process.exit(1);
