#!/usr/bin/env node
// Embeddings benchmark: svc against llama.cpp's own llama-server (--embedding, same pinned
// source, same model and threads), over HTTP with OpenAI /v1/embeddings requests, one server
// process at a time. Measures one short input's latency, a 256-input request's throughput, and
// 8 clients sending one input each; checks that both servers write the same vectors.
//
//   node bench/embeddings.mjs [--model PATH | --kind bert-tiny] [--threads N] [--reps 3] [--seconds 5]
//                             [--llama-server PATH] [--out FILE] [--no-write]
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, HOST } from './net.mjs';
import { refBin } from './build-reference.mjs';
import { ensureModel } from '../test/fixtures/models.mjs';
import { startServer, stopServer } from './lib/servers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const WORDS = 'the quick brown fox jumps over a lazy dog while seven small cats watch from the old garden wall'.split(' ');

function parseArgs(argv) {
  const o = { model: null, kind: 'bert-tiny', threads: os.cpus().length, reps: 3, seconds: 5, llamaServer: refBin('llama-server'), out: null, write: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    if (a === '--model') o.model = v();
    else if (a === '--kind') o.kind = v();
    else if (a === '--threads') o.threads = Number(v());
    else if (a === '--reps') o.reps = Number(v());
    else if (a === '--seconds') o.seconds = Number(v());
    else if (a === '--llama-server') o.llamaServer = v();
    else if (a === '--out') o.out = v();
    else if (a === '--no-write') o.write = false;
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** A sentence of 8-20 words, different for each i. */
function sentence(i) {
  const n = 8 + (i % 13);
  return Array.from({ length: n }, (_, k) => WORDS[(i * 7 + k * 3) % WORDS.length]).join(' ');
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function embed(port, input) {
  // No model name: each server's own (llama-server ignores the field).
  const body = Buffer.from(JSON.stringify({ input, encoding_format: 'float' }));
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request({ host: HOST, port, method: 'POST', path: '/v1/embeddings', agent, headers: { 'content-type': 'application/json', 'content-length': body.length } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 300)}`));
        resolve({ ms: performance.now() - t0, json: JSON.parse(text) });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function measure(port, o) {
  for (let i = 0; i < 20; i++) await embed(port, sentence(i)); // warm-up
  const single = [];
  for (let i = 0; i < 200; i++) single.push((await embed(port, sentence(i))).ms);
  const batch = Array.from({ length: 256 }, (_, i) => sentence(i));
  const batchMs = [];
  for (let r = 0; r < 3; r++) batchMs.push((await embed(port, batch)).ms);
  // 8 clients, one input per request, for o.seconds.
  let done = 0;
  const until = performance.now() + o.seconds * 1000;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: 8 }, async (_, c) => {
    for (let i = c; performance.now() < until; i += 8) {
      await embed(port, sentence(i));
      done++;
    }
  }));
  const concS = (performance.now() - t0) / 1000;
  const probe = (await embed(port, [sentence(1), sentence(2)])).json.data.map((d) => d.embedding);
  return { singleMs: median(single), batchInputsPerS: 256 / (median(batchMs) / 1000), concReqPerS: done / concS, probe };
}

async function runServer(kind, model, o) {
  const port = await freePort();
  const argv =
    kind === 'llama'
      ? [o.llamaServer, '-m', model, '--embedding', '--host', HOST, '--port', String(port), '-t', String(o.threads), '-tb', String(o.threads), '-np', '8', '-c', '4096', '-b', '4096', '-ub', '4096', '--no-webui']
      : ['node', 'bin/svc.js', '-m', model, '-addr', `${HOST}:${port}`, '-threads', String(o.threads)];
  const logFile = path.join(os.tmpdir(), `bench-embed-${kind}.log`);
  const srv = await startServer({ name: kind, argv, port, healthPaths: ['/health', '/healthz'], logFile, timeoutS: 120 });
  try {
    return await measure(port, o);
  } finally {
    await stopServer(srv);
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const model = o.model ?? ensureModel(o.kind);
  if (!fs.existsSync(o.llamaServer)) throw new Error(`no llama-server at ${o.llamaServer} (node bench/build-reference.mjs)`);
  const runs = { llama: [], svc: [] };
  for (let r = 0; r < o.reps; r++) {
    for (const kind of ['llama', 'svc']) runs[kind].push(await runServer(kind, model, o));
  }
  const pick = (kind, k) => median(runs[kind].map((x) => x[k]));
  const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
  const agree = Math.min(...runs.svc[0].probe.map((v, i) => dot(v, runs.llama[0].probe[i])));
  const rows = [
    ['single input latency (ms, lower is better)', 'singleMs', true],
    ['256-input request (inputs/s)', 'batchInputsPerS', false],
    ['8 clients, one input each (requests/s)', 'concReqPerS', false],
  ].map(([label, k, lower]) => {
    const l = pick('llama', k);
    const s = pick('svc', k);
    return { label, llama: l, svc: s, ratio: lower ? l / s : s / l };
  });
  console.log(`model ${path.basename(model)}, ${o.threads} threads, ${o.reps} reps (medians); ratio > 1 means svc is better`);
  for (const r of rows) console.log(`${r.label.padEnd(46)} llama-server ${r.llama.toFixed(2).padStart(9)}  svc ${r.svc.toFixed(2).padStart(9)}  ${r.ratio.toFixed(2)}×`);
  console.log(`vectors agree: lowest cosine between the servers' vectors ${agree.toFixed(6)}`);
  const result = { date: new Date().toISOString(), model: path.basename(model), threads: o.threads, reps: o.reps, rows, agree };
  if (o.write) {
    const out = o.out ?? path.join(HERE, 'results', `embeddings-${result.date.replace(/[:.]/g, '-')}.json`);
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, JSON.stringify(result, null, 2));
    console.log(`wrote ${out}`);
  }
}

main().catch((e) => {
  console.error(e.message);
  process.exit(1);
});
