#!/usr/bin/env node
// Benchmark harness: svc vs llama.cpp's own llama-server, same model, threads and prompts,
// measured over HTTP with streaming OpenAI /v1/completions requests. One server process
// at a time. See bench/README.md.
//
//   node bench/run.mjs [--models stories,qwen05b] [--only llama|svc] [--threads N] [--reps 3]
//                      [--svc-cmd 'node bin/svc.js -m {model} -addr {host}:{port} -threads {threads} -concurrency {parallel} -ctx-size {slot_ctx}']
//                      [--llama-server PATH] [--llama-extra '-ngl 999'] [--llama-env K=V] [--svc-env K=V] [--llama-huge-pages] [--no-drop-caches] [--ctx 8192] [--out FILE] [--no-write]
//                      [--warmup 2000] [--warmup-s 20] [--ttft-samples 100] [--decode-samples 3] [--no-interleave] [--keep-alive] [--cache-prompt]
//   On a GPU: --svc-cmd '... -backend cuda' --llama-server build/native/cuda/ref/llama-server --llama-extra '-ngl 999'
//
// No dependencies beyond Node 20.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './net.mjs';
import { llamaCommit, refTargets } from './build-reference.mjs';
import { ensureModel, realModel } from '../test/fixtures/models.mjs';
import { addEnvArg, commandLine, dropPageCache, hugePagesMiB, peakRssMiB, serverArgv, serverEnv, startServer, stopServer } from './lib/servers.mjs';
import { createClient } from './lib/client.mjs';
import { measureServer, summarize } from './lib/measure.mjs';
import { printTable, summaryLine } from './lib/report.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));

// -ctx-size {slot_ctx}: the same KV cache size as llama-server's -c (ctx-size × concurrency cells).
const DEFAULT_SVC_CMD = 'node bin/svc.js -m {model} -addr {host}:{port} -threads {threads} -concurrency {parallel} -ctx-size {slot_ctx}';

// Per-model workload. prefillTokens: target prompt length for the prefill measurement;
// decodeTokens: max_tokens of the single-stream decode run; concTokens: max_tokens of
// each of the concurrent streams.
const MODELS = {
  stories: { label: 'stories260K', get: () => realModel('stories260K.gguf'), prefillTokens: 512, decodeTokens: 256, concTokens: 256 },
  qwen05b: { label: 'qwen2-0.5b q8_0 (synthetic)', get: async () => ensureModel('qwen2-0.5b', { quiet: false }), prefillTokens: 512, decodeTokens: 128, concTokens: 64 },
};

function parseArgs(argv) {
  const o = {
    models: ['stories', 'qwen05b'],
    only: null,
    threads: os.cpus().length,
    reps: 3,
    parallel: 8,
    ctx: 8192,
    svcCmd: DEFAULT_SVC_CMD,
    llamaServer: null,
    llamaExtra: '',
    llamaHugePages: false,
    dropCaches: true,
    out: null,
    write: true,
    timeoutS: 600,
    decodeTokens: null,
    concTokens: null,
    warmup: 2000,
    warmupS: 20,
    interleave: true,
    ttftSamples: 100,
    decodeSamples: 3,
    keepAlive: false,
    cachePrompt: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--models') o.models = next().split(',').map((s) => s.trim()).filter(Boolean);
    else if (a === '--only') o.only = next();
    else if (a === '--threads' || a === '-t') o.threads = Number(next());
    else if (a === '--reps') o.reps = Number(next());
    else if (a === '--parallel') o.parallel = Number(next());
    else if (a === '--ctx') o.ctx = Number(next());
    else if (a === '--svc-cmd') o.svcCmd = next();
    else if (a === '--llama-server') o.llamaServer = next();
    else if (a === '--llama-extra') o.llamaExtra = next();
    else if (a === '--llama-env') o.llamaEnv = addEnvArg(o.llamaEnv ?? {}, next());
    else if (a === '--svc-env') o.svcEnv = addEnvArg(o.svcEnv ?? {}, next());
    else if (a === '--llama-huge-pages') o.llamaHugePages = true;
    else if (a === '--no-drop-caches') o.dropCaches = false;
    else if (a === '--out') o.out = next();
    else if (a === '--no-write') o.write = false;
    else if (a === '--timeout') o.timeoutS = Number(next());
    else if (a === '--decode-tokens') o.decodeTokens = Number(next());
    else if (a === '--conc-tokens') o.concTokens = Number(next());
    else if (a === '--warmup') o.warmup = Number(next());
    else if (a === '--warmup-s') o.warmupS = Number(next());
    else if (a === '--no-interleave') o.interleave = false;
    else if (a === '--ttft-samples') o.ttftSamples = Math.max(1, Number(next()));
    else if (a === '--decode-samples') o.decodeSamples = Math.max(1, Number(next()));
    else if (a === '--keep-alive') o.keepAlive = true;
    else if (a === '--cache-prompt') o.cachePrompt = true;
    else if (a === '-h' || a === '--help') {
      console.log(fs.readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(0, 10).join('\n'));
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  for (const m of o.models) if (!MODELS[m]) throw new Error(`unknown model ${m} (known: ${Object.keys(MODELS).join(', ')})`);
  if (o.only && !['llama', 'svc'].includes(o.only)) throw new Error('--only takes llama or svc');
  return o;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const client = createClient({ keepAlive: opts.keepAlive, cachePrompt: opts.cachePrompt });
  const servers = opts.only ? [opts.only] : ['llama', 'svc'];
  const date = new Date().toISOString();
  const loadStart = os.loadavg().map((x) => +x.toFixed(2));
  if (loadStart[0] > os.cpus().length * 0.5) {
    console.error(`warning: load average ${loadStart[0]} on ${os.cpus().length} CPUs; other processes will skew the figures`);
  }
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
  let cacheDropFailed = false;
  const results = {};
  const calibByModel = {};
  const info = {};
  for (const m of opts.models) {
    const cfg = MODELS[m];
    const modelPath = await cfg.get();
    results[m] = { model: cfg.label, path: modelPath };
    calibByModel[m] = {};
    // Interleaved (default): each repetition starts each server afresh, in
    // alternating order, so a machine whose speed drifts (shared or virtual CPUs)
    // skews both alike; --no-interleave measures all repetitions in one run each.
    const raws = Object.fromEntries(servers.map((s) => [s, { prefill: [], decode: [], ttft: [], concurrent: [], peakRssMiB: [], hugePagesMiB: [] }]));
    const runs = opts.interleave ? Array.from({ length: opts.reps }, (_, r) => (r % 2 ? [...servers].reverse() : servers).map((s) => [s, r])) : servers.map((s) => [[s, null]]);
    const started = {};
    for (const [s, r] of runs.flat()) {
      const port = await freePort();
      const argv = serverArgv(s, modelPath, port, opts);
      const env = serverEnv(s, opts);
      // Each server starts from a cold page cache where the machine allows it (see dropPageCache).
      if (opts.dropCaches && !dropPageCache() && !cacheDropFailed) {
        cacheDropFailed = true;
        console.error('warning: cannot drop the page cache (not root?): a mapped model runs at a speed that depends on how the file was last read');
      }
      console.error(`[${m}] starting ${s}${r === null ? '' : ` (rep ${r + 1}/${opts.reps})`}: ${commandLine(argv, env)}`);
      const srv = await startServer({
        name: s, argv, port, healthPaths: s === 'llama' ? ['/health'] : ['/healthz', '/health'], env,
        logFile: path.join(logDir, `${m}-${s}${r === null ? '' : `-${r + 1}`}.log`), timeoutS: opts.timeoutS,
      });
      try {
        started[s] = { command: commandLine(argv, env), startup_s: srv.startS };
        await measureServer(client, port, cfg, opts, calibByModel[m], r === null ? opts.reps : 1, raws[s]);
        raws[s].peakRssMiB.push(peakRssMiB(srv));
        raws[s].hugePagesMiB.push(hugePagesMiB(srv));
      } finally {
        await stopServer(srv);
      }
    }
    for (const s of servers) {
      const r = { ...summarize(raws[s], opts), ...started[s] };
      results[m][s] = r;
      console.error(summaryLine(m, s, r, opts.parallel));
    }
    if (results[m].llama && results[m].svc) {
      const ratio = (k) => (results[m].llama[k] && results[m].svc[k] != null ? results[m].svc[k] / results[m].llama[k] : null);
      results[m].ratios_svc_over_llama = {
        prefill_tps: ratio('prefill_tps'), decode_tps: ratio('decode_tps'), ttft_ms: ratio('ttft_ms'),
        [`agg${opts.parallel}_tps`]: ratio(`agg${opts.parallel}_tps`), peak_rss_mib: ratio('peak_rss_mib'),
      };
    }
    info[m] = { prefillReps: calibByModel[m].prefillReps };
  }
  console.log('');
  printTable(results, servers, opts.parallel);
  const cpuModel = os.cpus()[0]?.model ?? 'unknown';
  const doc = {
    date,
    host: { cpus: os.cpus().length, cpu: cpuModel, loadavgAtStart: loadStart, loadavgAtEnd: os.loadavg().map((x) => +x.toFixed(2)), totalMemGiB: +(os.totalmem() / 2 ** 30).toFixed(1), platform: `${os.platform()} ${os.release()}`, node: process.version },
    llamaCommit: llamaCommit(),
    llamaTargets: (() => { try { return refTargets(); } catch { return null; } })(),
    config: { threads: opts.threads, reps: opts.reps, interleave: opts.interleave, warmup: opts.warmup, warmupS: opts.warmupS, ttftSamples: opts.ttftSamples, decodeSamples: opts.decodeSamples, keepAlive: opts.keepAlive, cachePrompt: opts.cachePrompt, dropCaches: opts.dropCaches && !cacheDropFailed, llamaHugePages: opts.llamaHugePages, parallel: opts.parallel, ctx: opts.ctx, svcCmd: opts.svcCmd, servers, models: opts.models, prompts: info },
    targets: { decode_tps: '>= 1.0x', [`agg${opts.parallel}_tps`]: '>= 1.0x', ttft_ms: '<= 1.05x' },
    results,
    logs: logDir,
  };
  if (opts.write) {
    const out = opts.out || path.join(HERE, 'results', `${date.replace(/[:]/g, '-').replace(/\..*$/, '')}.json`);
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, JSON.stringify(doc, null, 2) + '\n');
    console.log(`\nwrote ${path.relative(process.cwd(), out)} (server logs in ${logDir})`);
  }
}

main().catch((e) => {
  console.error(`bench: ${process.env.SVC_BENCH_DEBUG ? e.stack : e.message}`);
  process.exit(1);
});
