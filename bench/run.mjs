#!/usr/bin/env node
// Benchmark harness: svc vs llama.cpp's own llama-server, same model, threads and prompts,
// measured over HTTP with streaming OpenAI /v1/completions requests. One server process
// at a time. See bench/README.md.
//
//   node bench/run.mjs [--models stories,qwen05b] [--only llama|svc] [--threads N] [--reps 3]
//                      [--svc-cmd 'node bin/svc.js -m {model} -addr {host}:{port} -threads {threads} -concurrency {parallel}']
//                      [--llama-server PATH] [--llama-extra '-ngl 999'] [--ctx 8192] [--out FILE] [--no-write]
//                      [--warmup 30] [--ttft-samples 5] [--no-interleave] [--keep-alive] [--cache-prompt]
//   On a GPU: --svc-cmd '... -backend cuda' --llama-server build/native/cuda/ref/llama-server --llama-extra '-ngl 999'
//
// No dependencies beyond Node 20.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, HOST } from './net.mjs';
import { refBin, llamaCommit, refTargets } from './build-reference.mjs';
import { ensureModel, realModel } from '../test/fixtures/models.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = path.resolve(HERE, '..');

const DEFAULT_SVC_CMD = 'node bin/svc.js -m {model} -addr {host}:{port} -threads {threads} -concurrency {parallel}';

// Per-model workload. prefillTokens: target prompt length for the prefill measurement;
// decodeTokens: max_tokens of the single-stream decode run; concTokens: max_tokens of
// each of the concurrent streams.
const MODELS = {
  stories: { label: 'stories260K', get: () => realModel('stories260K.gguf'), prefillTokens: 512, decodeTokens: 256, concTokens: 256 },
  qwen05b: { label: 'qwen2-0.5b q8_0 (synthetic)', get: async () => ensureModel('qwen2-0.5b', { quiet: false }), prefillTokens: 512, decodeTokens: 128, concTokens: 64 },
};

// Filler text for prompts (tokenises reasonably on both the SentencePiece stories vocab
// and the qwen2 BPE vocab).
const STORY = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog, Max. ' +
  'One day, Lily and Max found a big red ball under a tree. They played with the ball all day long, and when the sun went down, ' +
  'they went home happy and tired. Her mom made a warm soup, and Lily told her all about the ball and the tree. ';

const SHORT_PROMPT = 'Once upon a time';
const CONC_PROMPTS = [
  'Once upon a time, there was a little boy named Tim.',
  'One day, a cat sat on a mat in the sun.',
  'The little bird wanted to fly over the big hill.',
  'Sara had a red car. She liked to play with it.',
  'Ben and his mom went to the store to buy milk.',
  'There was a big tree in the garden. It was very old.',
  'Lily saw a shiny stone near the river.',
  'The dog ran fast to catch the ball.',
];

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
    out: null,
    write: true,
    timeoutS: 600,
    decodeTokens: null,
    concTokens: null,
    warmup: 30,
    interleave: true,
    ttftSamples: 5,
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
    else if (a === '--out') o.out = next();
    else if (a === '--no-write') o.write = false;
    else if (a === '--timeout') o.timeoutS = Number(next());
    else if (a === '--decode-tokens') o.decodeTokens = Number(next());
    else if (a === '--conc-tokens') o.concTokens = Number(next());
    else if (a === '--warmup') o.warmup = Number(next());
    else if (a === '--no-interleave') o.interleave = false;
    else if (a === '--ttft-samples') o.ttftSamples = Math.max(1, Number(next()));
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

// ---------------------------------------------------------------------------------------
// processes


function splitCmd(cmd) {
  // whitespace split with simple '...' / "..." quoting
  const out = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let m;
  while ((m = re.exec(cmd))) out.push(m[1] ?? m[2] ?? m[3]);
  return out;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function httpGetStatus(port, p) {
  return new Promise((resolve) => {
    const req = http.get({ host: HOST, port, path: p, timeout: 2000, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on('error', () => resolve(0));
    req.on('timeout', () => { req.destroy(); resolve(0); });
  });
}

async function startServer({ name, argv, port, healthPaths, logFile, timeoutS }) {
  const log = fs.openSync(logFile, 'w');
  fs.writeSync(log, `$ ${argv.join(' ')}\n`);
  const child = spawn(argv[0], argv.slice(1), { cwd: REPO_ROOT, stdio: ['ignore', log, log] });
  fs.closeSync(log);
  let exited = null;
  child.on('exit', (code, sig) => { exited = { code, sig }; });
  child.on('error', (e) => { exited = { code: -1, sig: null, err: e.message }; });
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutS * 1000) {
    if (exited) {
      const tail = fs.readFileSync(logFile, 'utf8').split('\n').slice(-30).join('\n');
      throw new Error(`${name} exited before becoming healthy (${JSON.stringify(exited)}); log ${logFile}:\n${tail}`);
    }
    for (const p of healthPaths) {
      if ((await httpGetStatus(port, p)) === 200) {
        return { child, name, port, startS: (Date.now() - t0) / 1000, logFile };
      }
    }
    await sleep(200);
  }
  child.kill('SIGKILL');
  throw new Error(`${name} not healthy after ${timeoutS} s; log ${logFile}`);
}

async function stopServer(srv) {
  const { child } = srv;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const done = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await done;
  clearTimeout(t);
}

// ---------------------------------------------------------------------------------------
// streaming client

/**
 * POST /v1/completions with stream: true; returns timings (ms, relative to send) and counts.
 * tFirst: first chunk carrying generated text; tLast: final chunk (finish_reason / usage / [DONE]).
 */
/**
 * Completion requests open a new connection each by default; --keep-alive reuses
 * connections, as the official OpenAI/Anthropic/Ollama clients do.
 */
let completionAgent = false;
let CACHE_PROMPT = false;

function streamCompletion(port, body, timeoutMs, retried = false) {
  // The retry takes a new connection: the pool may hold more sockets the server closed.
  const agent = retried ? false : completionAgent;
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } });
    const t0 = performance.now();
    const r = {
      tFirst: null, tFirstChunk: null, tLast: null, tDone: null, chunks: 0, textChunks: 0,
      text: '', usage: null, finishReason: null, serverTimings: null,
    };
    const req = http.request({
      host: HOST, port, path: '/v1/completions', method: 'POST', agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), accept: 'text/event-stream' },
    }, (res) => {
      if (res.statusCode !== 200) {
        let err = '';
        res.setEncoding('utf8');
        res.on('data', (d) => { err += d; });
        res.on('end', () => reject(new Error(`HTTP ${res.statusCode}: ${err.slice(0, 500)}`)));
        return;
      }
      res.setEncoding('utf8');
      let buf = '';
      const onEvent = (data) => {
        const now = performance.now() - t0;
        if (data === '[DONE]') { r.tDone = now; return; }
        let j;
        try { j = JSON.parse(data); } catch { return; }
        if (j.error) { reject(new Error(`stream error: ${JSON.stringify(j.error)}`)); return; }
        r.chunks++;
        if (r.tFirstChunk === null) r.tFirstChunk = now;
        const ch = j.choices?.[0];
        if (ch) {
          if (typeof ch.text === 'string' && ch.text.length > 0) {
            r.textChunks++;
            r.text += ch.text;
            if (r.tFirst === null) r.tFirst = now;
            r.tLast = now;
          }
          if (ch.finish_reason) {
            r.finishReason = ch.finish_reason;
            if (r.tFirst === null) r.tFirst = now;
            r.tLast = now;
          }
        }
        if (j.usage) r.usage = j.usage;
        if (j.timings) r.serverTimings = j.timings;
      };
      res.on('data', (d) => {
        buf += d;
        let idx;
        while ((idx = buf.search(/\r?\n\r?\n/)) >= 0) {
          const block = buf.slice(0, idx);
          buf = buf.slice(idx).replace(/^\r?\n\r?\n/, '');
          const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
          if (data) onEvent(data);
        }
      });
      res.on('end', () => {
        r.tEnd = performance.now() - t0;
        if (r.tFirst === null) { reject(new Error('stream ended without any generated token')); return; }
        r.promptTokens = r.usage?.prompt_tokens ?? null;
        // completion tokens: from usage when the server reports it, else one per text chunk
        r.completionTokens = r.usage?.completion_tokens ?? r.textChunks;
        resolve(r);
      });
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`request timed out after ${timeoutMs} ms`)));
    // A kept-alive socket the server closed meanwhile (llama-server: Keep-Alive max=100): once more.
    req.on('error', (e) => (req.reusedSocket && e.code === 'ECONNRESET' && !retried ? streamCompletion(port, body, timeoutMs, true).then(resolve, reject) : reject(e)));
    req.end(payload);
  });
}

function completionBody(prompt, maxTokens) {
  return {
    prompt,
    max_tokens: maxTokens,
    temperature: 0,
    ignore_eos: true, // llama-server honours it; servers that do not are measured on real token counts
    // Both servers: no prompt cache (the distinct tags leave nothing to reuse; keeping would only cost);
    // --cache-prompt measures them with their caches on.
    cache_prompt: CACHE_PROMPT,
  };
}

// ---------------------------------------------------------------------------------------
// measurements

const median = (xs) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return null;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const range = (xs) => {
  const s = xs.filter((x) => Number.isFinite(x));
  return s.length ? [Math.min(...s), Math.max(...s)] : null;
};

// Every request gets a distinct leading tag so no server can reuse a cached prefix.
let nonce = 0;
const tag = () => `[${++nonce}] `;

function repeatTo(nRepeats) {
  return STORY.repeat(Math.max(1, nRepeats)).trim();
}

/** Pick a prompt of about `target` tokens by asking the server for prompt_tokens. */
async function calibratePrompt(port, target, timeoutMs) {
  let reps = 4;
  for (let i = 0; i < 4; i++) {
    const r = await streamCompletion(port, completionBody(tag() + repeatTo(reps), 1), timeoutMs);
    if (!r.promptTokens) return { reps, tokens: null };
    const perRep = r.promptTokens / reps;
    const want = Math.max(1, Math.round(target / perRep));
    if (want === reps) return { reps, tokens: r.promptTokens };
    reps = want;
  }
  return { reps, tokens: null };
}

/** svc's /v1/stats (null elsewhere). */
async function serverStats(port) {
  return new Promise((resolve) => {
    const req = http.get({ host: HOST, port, path: '/v1/stats', agent: false, timeout: 2000 }, (res) => {
      let b = '';
      res.on('data', (d) => (b += d));
      res.on('end', () => {
        try {
          const j = JSON.parse(b);
          resolve(res.statusCode === 200 && typeof j.decode_ms === 'number' ? j : null);
        } catch {
          resolve(null);
        }
      });
    });
    req.on('error', () => resolve(null));
    req.on('timeout', () => req.destroy());
  });
}

/** Warm-up, then `reps` repetitions of every measurement into `raw`. */
async function measureServer(port, model, cfg, opts, calib, reps, raw) {
  const timeoutMs = opts.timeoutS * 1000;
  // warm-up (not counted): every path the measurements take, the request path
  // --warmup times (V8 compiles a function to optimized code only after it ran
  // many times), so a JIT-compiled server is measured warm, as one that has been
  // serving is, like a native one.
  await streamCompletion(port, completionBody(tag() + SHORT_PROMPT, 8), timeoutMs);
  for (let i = 0; i < opts.warmup; i++) await streamCompletion(port, completionBody(tag() + SHORT_PROMPT, 1), timeoutMs);
  for (let i = 0; i < Math.min(2, opts.warmup); i++) {
    await streamCompletion(port, completionBody(tag() + repeatTo(2), 32), timeoutMs);
    await Promise.all(Array.from({ length: opts.parallel }, (_, k) =>
      streamCompletion(port, completionBody(tag() + CONC_PROMPTS[k % CONC_PROMPTS.length], 16), timeoutMs)));
  }

  if (!calib.prefillReps) {
    const c = await calibratePrompt(port, cfg.prefillTokens, timeoutMs);
    calib.prefillReps = c.reps;
  }
  const longPrompt = repeatTo(calib.prefillReps);
  const decodeN = opts.decodeTokens ?? cfg.decodeTokens;
  const concN = opts.concTokens ?? cfg.concTokens;

  for (let rep = 0; rep < reps; rep++) {
    // 1. prefill: ~512-token prompt, one generated token; prompt tokens / time to first token
    {
      const r = await streamCompletion(port, completionBody(tag() + longPrompt, 1), timeoutMs);
      raw.prefill.push({ promptTokens: r.promptTokens, ttftMs: r.tFirst, tps: r.promptTokens ? r.promptTokens / (r.tFirst / 1000) : null, server: r.serverTimings?.prompt_per_second ?? null });
    }
    // 2. TTFT for a short prompt, --ttft-samples times (one request is a few ms: a single one is mostly noise)
    for (let k = 0; k < opts.ttftSamples; k++) {
      const r = await streamCompletion(port, completionBody(tag() + SHORT_PROMPT, 1), timeoutMs);
      // svc reports its own share: admission to first token (svc_prefill_ms); the rest is HTTP and the request pipeline.
      raw.ttft.push({ promptTokens: r.promptTokens, ttftMs: r.tFirst, serverPrefillMs: r.usage?.svc_prefill_ms ?? r.serverTimings?.prompt_ms ?? null });
    }
    // 3. single-stream decode: tokens after the first / time from first to last token
    {
      const before = await serverStats(port);
      const r = await streamCompletion(port, completionBody(tag() + SHORT_PROMPT, decodeN), timeoutMs);
      const after = await serverStats(port);
      const dt = (r.tLast - r.tFirst) / 1000;
      // The engine's own share per generated token (llama-server: its timings; svc: /v1/stats decode_ms + sample_ms).
      const engineMsPerToken = r.serverTimings?.predicted_per_token_ms ??
        (before && after && r.completionTokens ? (after.decode_ms + after.sample_ms - before.decode_ms - before.sample_ms) / r.completionTokens : null);
      // svc: how long its engine sat idle between steps while this stream decoded (round trips through JS).
      const engineIdleMsPerToken = before && after && typeof after.decode_idle_ms === 'number' && r.completionTokens ? (after.decode_idle_ms - before.decode_idle_ms) / r.completionTokens : null;
      raw.decode.push({ completionTokens: r.completionTokens, finishReason: r.finishReason, seconds: dt, tps: r.completionTokens > 1 && dt > 0 ? (r.completionTokens - 1) / dt : null, server: r.serverTimings?.predicted_per_second ?? null, engineMsPerToken, engineIdleMsPerToken });
    }
    // 4. N concurrent streams: total completion tokens / wall time
    {
      const t0 = performance.now();
      const rs = await Promise.all(Array.from({ length: opts.parallel }, (_, k) =>
        streamCompletion(port, completionBody(tag() + CONC_PROMPTS[k % CONC_PROMPTS.length], concN), timeoutMs)));
      const wall = (performance.now() - t0) / 1000;
      const total = rs.reduce((s, r) => s + r.completionTokens, 0);
      raw.concurrent.push({ streams: rs.length, completionTokens: total, seconds: wall, tps: total / wall, maxTtftMs: Math.max(...rs.map((r) => r.tFirst)) });
    }
  }
}

/** Medians (and spreads) of everything measured. */
function summarize(raw, opts) {
  return {
    prefill_tps: median(raw.prefill.map((x) => x.tps)),
    prefill_prompt_tokens: median(raw.prefill.map((x) => x.promptTokens)),
    decode_tps: median(raw.decode.map((x) => x.tps)),
    decode_tokens: median(raw.decode.map((x) => x.completionTokens)),
    // engine time per generated token (decode + sample), as the server reports it
    engine_ms_per_token: median(raw.decode.map((x) => x.engineMsPerToken)),
    engine_idle_ms_per_token: median(raw.decode.map((x) => x.engineIdleMsPerToken)),
    ttft_ms: median(raw.ttft.map((x) => x.ttftMs)),
    // The short prompt's TTFT split: the server's own prefill share (svc: admission to first
    // token; llama-server: prompt_ms) and the rest (HTTP, request path, client).
    ttft_engine_ms: median(raw.ttft.map((x) => x.serverPrefillMs)),
    ttft_rest_ms: median(raw.ttft.map((x) => (x.serverPrefillMs == null ? null : x.ttftMs - x.serverPrefillMs))),
    [`agg${opts.parallel}_tps`]: median(raw.concurrent.map((x) => x.tps)),
    // [min, max] over the repetitions, to show how noisy the machine was
    spread: {
      prefill_tps: range(raw.prefill.map((x) => x.tps)),
      decode_tps: range(raw.decode.map((x) => x.tps)),
      ttft_ms: range(raw.ttft.map((x) => x.ttftMs)),
      [`agg${opts.parallel}_tps`]: range(raw.concurrent.map((x) => x.tps)),
    },
    raw,
  };
}

// ---------------------------------------------------------------------------------------

function serverArgv(kind, modelPath, port, opts) {
  if (kind === 'llama') {
    const bin = opts.llamaServer || refBin('llama-server');
    if (!fs.existsSync(bin)) throw new Error(`llama-server not found at ${bin}; run node bench/build-reference.mjs (or pass --llama-server)`);
    return [bin, '-m', modelPath, '--host', HOST, '--port', String(port), '-np', String(opts.parallel),
      '-t', String(opts.threads), '-tb', String(opts.threads), '-c', String(opts.ctx), '--no-webui', ...splitCmd(opts.llamaExtra)];
  }
  const sub = { model: modelPath, host: HOST, port: String(port), threads: String(opts.threads), parallel: String(opts.parallel), ctx: String(opts.ctx) };
  return splitCmd(opts.svcCmd).map((t) => t.replace(/\{(\w+)\}/g, (m, k) => (k in sub ? sub[k] : m)));
}

function fmt(x, d = 1) {
  return x === null || x === undefined ? '-' : Number(x).toFixed(d);
}

function printTable(results, servers, parallel) {
  const aggKey = `agg${parallel}_tps`;
  const metrics = [
    ['prefill t/s', 'prefill_tps', 1, 'higher'],
    ['decode t/s', 'decode_tps', 1, 'higher'],
    ['TTFT ms (short)', 'ttft_ms', 1, 'lower'],
    [`${parallel}-stream agg t/s`, aggKey, 1, 'higher'],
  ];
  const rows = [['model', 'metric', ...servers.map((s) => (s === 'llama' ? 'llama-server' : 'svc')), ...(servers.length === 2 ? ['svc/llama'] : [])]];
  for (const [model, r] of Object.entries(results)) {
    for (const [label, key, d] of metrics) {
      const vals = servers.map((s) => r[s]?.[key] ?? null);
      const row = [model, label, ...vals.map((v) => fmt(v, d))];
      if (servers.length === 2) row.push(vals[0] && vals[1] !== null ? `${(vals[1] / vals[0]).toFixed(2)}x` : '-');
      rows.push(row);
    }
  }
  const w = rows[0].map((_, c) => Math.max(...rows.map((r) => String(r[c]).length)));
  const line = (r) => r.map((v, c) => (c < 2 ? String(v).padEnd(w[c]) : String(v).padStart(w[c]))).join('  ');
  console.log(line(rows[0]));
  console.log(w.map((n) => '-'.repeat(n)).join('  '));
  for (const r of rows.slice(1)) console.log(line(r));
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  CACHE_PROMPT = opts.cachePrompt;
  if (opts.keepAlive) completionAgent = new http.Agent({ keepAlive: true });
  const servers = opts.only ? [opts.only] : ['llama', 'svc'];
  const date = new Date().toISOString();
  const loadStart = os.loadavg().map((x) => +x.toFixed(2));
  if (loadStart[0] > os.cpus().length * 0.5) {
    console.error(`warning: load average ${loadStart[0]} on ${os.cpus().length} CPUs; other processes will skew the figures`);
  }
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
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
    const raws = Object.fromEntries(servers.map((s) => [s, { prefill: [], decode: [], ttft: [], concurrent: [] }]));
    const runs = opts.interleave ? Array.from({ length: opts.reps }, (_, r) => (r % 2 ? [...servers].reverse() : servers).map((s) => [s, r])) : servers.map((s) => [[s, null]]);
    const started = {};
    for (const [s, r] of runs.flat()) {
      const port = await freePort();
      const argv = serverArgv(s, modelPath, port, opts);
      console.error(`[${m}] starting ${s}${r === null ? '' : ` (rep ${r + 1}/${opts.reps})`}: ${argv.join(' ')}`);
      const srv = await startServer({
        name: s, argv, port, healthPaths: s === 'llama' ? ['/health'] : ['/healthz', '/health'],
        logFile: path.join(logDir, `${m}-${s}${r === null ? '' : `-${r + 1}`}.log`), timeoutS: opts.timeoutS,
      });
      try {
        started[s] = { command: argv.join(' '), startup_s: srv.startS };
        await measureServer(port, m, cfg, opts, calibByModel[m], r === null ? opts.reps : 1, raws[s]);
      } finally {
        await stopServer(srv);
      }
    }
    for (const s of servers) {
      const r = { ...summarize(raws[s], opts), ...started[s] };
      results[m][s] = r;
      console.error(`[${m}] ${s}: prefill ${fmt(r.prefill_tps)} t/s, decode ${fmt(r.decode_tps)} t/s, ttft ${fmt(r.ttft_ms)} ms (engine ${fmt(r.ttft_engine_ms, 2)}, rest ${fmt(r.ttft_rest_ms, 2)}), agg ${fmt(r[`agg${opts.parallel}_tps`])} t/s, engine ${fmt(r.engine_ms_per_token, 3)} ms/token${r.engine_idle_ms_per_token != null ? `, engine idle ${fmt(r.engine_idle_ms_per_token, 3)} ms/token` : ''}`);
    }
    if (results[m].llama && results[m].svc) {
      const ratio = (k) => (results[m].llama[k] && results[m].svc[k] != null ? results[m].svc[k] / results[m].llama[k] : null);
      results[m].ratios_svc_over_llama = {
        prefill_tps: ratio('prefill_tps'), decode_tps: ratio('decode_tps'), ttft_ms: ratio('ttft_ms'),
        [`agg${opts.parallel}_tps`]: ratio(`agg${opts.parallel}_tps`),
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
    config: { threads: opts.threads, reps: opts.reps, interleave: opts.interleave, warmup: opts.warmup, ttftSamples: opts.ttftSamples, keepAlive: opts.keepAlive, cachePrompt: opts.cachePrompt, parallel: opts.parallel, ctx: opts.ctx, svcCmd: opts.svcCmd, servers, models: opts.models, prompts: info },
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
