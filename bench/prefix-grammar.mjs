#!/usr/bin/env node
// Prefix cache and constrained sampling on svc alone. See bench/README.md.
//
//   node bench/prefix-grammar.mjs [--model qwen2-0.5b|qwen2-tiny|stories260K|PATH] [--prefix 2000]
//                                 [--reps 3] [--tokens 64] [--threads N] [--out FILE] [--no-write]
//
// 1. Time to first token for a ~2,000-token shared prefix: cold (a distinct tag starts the
//    prompt, nothing reusable) vs cached (same prefix as a retained earlier request, a
//    different question at the end). Target: cached <= 0.2x cold.
// 2. Decode cost per token: unconstrained vs a GBNF grammar vs a JSON schema vs the
//    -lexicon word list, from the server's own svc_decode_ms / (completion_tokens - 1).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, HOST } from './net.mjs';
import { ensureModel, realModel } from '../test/fixtures/models.mjs';
import { startServer, stopServer } from './lib/servers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));

const STORY =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog, Max. ' +
  'One day, Lily and Max found a big red ball under a tree. They played with the ball all day long, and when the sun went down, ' +
  'they went home happy and tired. Her mom made a warm soup, and Lily told her all about the ball and the tree. ';

const GRAMMAR = 'root ::= sentence+\nsentence ::= word (" " word)* ". "\nword ::= [a-z]+';
const SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    pets: { type: 'array', items: { type: 'object', properties: { kind: { type: 'string', enum: ['dog', 'cat', 'bird'] }, name: { type: 'string' } }, required: ['kind', 'name'] } },
  },
  required: ['name', 'age', 'pets'],
};

function parseArgs(argv) {
  const o = { model: 'qwen2-0.5b', prefix: 2000, reps: 3, tokens: 64, threads: os.availableParallelism(), out: null, write: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => argv[++i];
    if (a === '--model') o.model = next();
    else if (a === '--prefix') o.prefix = Number(next());
    else if (a === '--reps') o.reps = Number(next());
    else if (a === '--tokens') o.tokens = Number(next());
    else if (a === '--threads' || a === '-t') o.threads = Number(next());
    else if (a === '--out') o.out = next();
    else if (a === '--no-write') o.write = false;
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

async function modelPath(name) {
  if (fs.existsSync(name)) return path.resolve(name);
  if (name.endsWith('.gguf') || name === 'stories260K') return realModel(name.endsWith('.gguf') ? name : `${name}.gguf`);
  return ensureModel(name, { quiet: false });
}


async function startSvc(model, threads, lexicon) {
  const port = await freePort();
  const store = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-store-'));
  const logFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-pg-')), 'svc.log');
  const args = ['bin/svc.js', '-m', model, '-addr', `${HOST}:${port}`, '-store', store, '-threads', String(threads), '-ctx-size', '4096', '-concurrency', '2', '-lexicon', lexicon, '-log-level', 'warn'];
  const srv = await startServer({ name: 'svc', argv: [process.execPath, ...args], port, healthPaths: ['/healthz'], logFile, timeoutS: 300 });
  return { url: `http://${HOST}:${port}`, command: `node ${args.join(' ')}`, stop: () => stopServer(srv) };
}

async function complete(url, body) {
  const t0 = performance.now();
  const r = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const json = await r.json();
  if (r.status !== 200) throw new Error(`${r.status}: ${JSON.stringify(json)}`);
  return { ms: performance.now() - t0, usage: json.usage, text: json.choices[0].text };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const round = (x, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

/** A prefix of about `target` tokens: the story repeated, calibrated from usage.prompt_tokens. */
async function calibratedPrefix(url, target) {
  const one = (await complete(url, { prompt: STORY, max_tokens: 1, svc_retain_prefix: false })).usage.prompt_tokens;
  return STORY.repeat(Math.max(1, Math.round(target / one)));
}

async function prefixBench(url, o) {
  const prefix = await calibratedPrefix(url, o.prefix);
  const cold = [];
  const cached = [];
  const ask = (tag, q) => complete(url, { prompt: `[${tag}] ${prefix}\nQuestion ${q}: what happened next?`, max_tokens: 1, temperature: 0 });
  for (let r = 0; r < o.reps; r++) cold.push(await ask(`cold-${r}-${Date.now()}`, r));
  await ask('shared', 'zero'); // retained: what the cached requests reuse
  for (let r = 0; r < o.reps; r++) cached.push(await ask('shared', r + 1));
  const summary = (runs) => ({
    promptTokens: runs[0].usage.prompt_tokens,
    cachedTokens: median(runs.map((x) => x.usage.prompt_tokens_details.cached_tokens)),
    ttftMs: round(median(runs.map((x) => x.ms))),
    prefillMs: round(median(runs.map((x) => x.usage.svc_prefill_ms))),
    raw: runs.map((x) => ({ ms: round(x.ms, 2), prefillMs: x.usage.svc_prefill_ms, cached: x.usage.prompt_tokens_details.cached_tokens })),
  });
  const c = summary(cold);
  const w = summary(cached);
  return { cold: c, cached: w, ratio: round(w.ttftMs / c.ttftMs, 3) };
}

async function constraintBench(url, o) {
  const modes = {
    unconstrained: { ignore_eos: true },
    grammar: { grammar: GRAMMAR },
    json_schema: { svc_schema: SCHEMA },
    lexicon: { svc_lexicon: true },
  };
  const out = {};
  for (const [mode, extra] of Object.entries(modes)) {
    const perToken = [];
    const tokens = [];
    for (let r = 0; r < o.reps; r++) {
      const res = await complete(url, { prompt: `[${mode} ${r}] ${STORY}`, max_tokens: o.tokens, temperature: 0.8, seed: r + 1, ...extra });
      const n = res.usage.completion_tokens;
      tokens.push(n);
      if (n > 1) perToken.push(res.usage.svc_decode_ms / (n - 1));
    }
    out[mode] = { msPerToken: round(median(perToken), 3), completionTokens: tokens, raw: perToken.map((x) => round(x, 3)) };
  }
  const base = out.unconstrained.msPerToken;
  for (const m of Object.keys(out)) out[m].vsUnconstrained = round(out[m].msPerToken / base, 2);
  return out;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const model = await modelPath(o.model);
  const lexDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-lex-'));
  const lexicon = path.join(lexDir, 'words.txt');
  fs.writeFileSync(lexicon, [...new Set(STORY.match(/[A-Za-z]+/g))].join('\n'));
  const load0 = os.loadavg();
  const svc = await startSvc(model, o.threads, lexicon);
  let result;
  try {
    const prefix = await prefixBench(svc.url, o);
    const constraints = await constraintBench(svc.url, o);
    result = { date: new Date().toISOString(), model: path.basename(model), command: svc.command, host: { cpus: os.availableParallelism(), loadavg: [load0, os.loadavg()] }, options: o, prefix, constraints };
  } finally {
    await svc.stop();
  }
  const p = result.prefix;
  console.log(`model ${result.model}, -threads ${o.threads}, ${o.reps} reps (median)`);
  console.log(`prefix ${p.cold.promptTokens} tokens: cold TTFT ${p.cold.ttftMs} ms (prefill ${p.cold.prefillMs} ms), cached TTFT ${p.cached.ttftMs} ms (prefill ${p.cached.prefillMs} ms, ${p.cached.cachedTokens} tokens reused): ${p.ratio}x`);
  for (const [m, v] of Object.entries(result.constraints)) console.log(`${m.padEnd(14)} ${v.msPerToken} ms/token (${v.vsUnconstrained}x), tokens ${v.completionTokens.join(',')}`);
  if (o.write) {
    const file = o.out ?? path.join(HERE, 'results', `prefix-grammar-${result.date.replace(/[:.]/g, '-')}.json`);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, JSON.stringify(result, null, 2));
    console.log(`results: ${file}`);
  }
}

main().catch((err) => {
  console.error(err.message);
  process.exit(1);
});
