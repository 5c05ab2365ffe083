#!/usr/bin/env node
// KV-cache contexts benchmark against a running svc server (started here, as bench/run.mjs
// starts it): fork time against context length, pages copied on fork, restore time against
// re-prefill time for the same tokens, snapshot size per precision. See bench/README.md.
//
//   node bench/contexts.mjs [--model PATH] [--lengths 1000,4000,16000] [--threads N] [--reps 5]
//                           [--svc-cmd '...'] [--out FILE] [--no-write]
//
// Default model: the synthetic llama-tiny fixture generated with a 16,384-token context
// (test/fixtures/models.mjs llama-tiny --n-ctx 16384), so that 16k-token contexts fit.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, HOST } from './net.mjs';
import { ensureModel } from '../test/fixtures/models.mjs';
import { splitCmd, startServer, stopServer } from './lib/servers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CTX = 16384;
const DEFAULT_SVC_CMD = `node bin/svc.js -m {model} -addr {host}:{port} -threads {threads} -ctx-size ${CTX} -concurrency 2 -cache-slots 0`;
const STORY =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog, Max. ' +
  'One day, Lily and Max found a big red ball under a tree. They played with the ball all day long, and when the sun went down, ' +
  'they went home happy and tired. Her mom made a warm soup, and Lily told her all about the ball and the tree. ';

function parseArgs(argv) {
  const o = { model: null, lengths: [1000, 4000, 16000], threads: os.cpus().length, reps: 5, svcCmd: DEFAULT_SVC_CMD, out: null, write: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    if (a === '--model') o.model = v();
    else if (a === '--lengths') o.lengths = v().split(',').map(Number);
    else if (a === '--threads') o.threads = Number(v());
    else if (a === '--reps') o.reps = Number(v());
    else if (a === '--svc-cmd') o.svcCmd = v();
    else if (a === '--out') o.out = v();
    else if (a === '--no-write') o.write = false;
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];


/** One HTTP request; resolves with status, body bytes and wall milliseconds. */
function request(port, method, p, body, type = 'application/json') {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
    const t0 = performance.now();
    const req = http.request({ host: HOST, port, method, path: p, agent: false, headers: data ? { 'content-type': type, 'content-length': data.length } : {} }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks), ms: performance.now() - t0 }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

async function json(port, method, p, body, want) {
  const r = await request(port, method, p, body);
  if (r.status !== want) throw new Error(`${method} ${p}: ${r.status} ${r.body.toString().slice(0, 300)}`);
  return { ...JSON.parse(r.body.toString() || '{}'), _ms: r.ms };
}

/** Tokens per STORY repetition, read from a context's token count (tokenization of repeats is near linear). */
async function tokensPerStory(port) {
  const c = await json(port, 'POST', '/v1/contexts', { prompt: STORY.repeat(10) }, 201);
  await request(port, 'DELETE', `/v1/contexts/${c.id}`);
  return c.tokens / 10;
}

async function measureLength(port, target, reps, perStory) {
  const prompt = STORY.repeat(Math.max(1, Math.round(target / perStory)));
  // Re-prefill: the same tokens computed from scratch (POST /v1/contexts prefills them).
  const prefills = [];
  let ctx;
  for (let i = 0; i < Math.max(1, Math.min(reps, target >= 8000 ? 2 : reps)); i++) {
    if (ctx) await request(port, 'DELETE', `/v1/contexts/${ctx.id}`);
    ctx = await json(port, 'POST', '/v1/contexts', { prompt }, 201);
    prefills.push(ctx._ms);
  }
  // Forks: one child at a time, fork_ms as the server reports it and the HTTP wall time.
  const forkMs = [];
  const forkWall = [];
  let copiedPages = 0;
  for (let i = 0; i < reps; i++) {
    const f = await json(port, 'POST', `/v1/contexts/${ctx.id}/fork?n=1`, {}, 201);
    forkMs.push(f.fork_ms);
    forkWall.push(f._ms);
    const kid = f.data[0];
    copiedPages += kid.pages - kid.shared_pages;
    await request(port, 'DELETE', `/v1/contexts/${kid.id}`);
  }
  const f64 = await json(port, 'POST', `/v1/contexts/${ctx.id}/fork?n=64`, {}, 201);
  for (const k of f64.data) {
    copiedPages += k.pages - k.shared_pages;
    await request(port, 'DELETE', `/v1/contexts/${k.id}`);
  }
  // Snapshots per precision, and restore of each.
  const snapshots = {};
  for (const precision of ['f32', 'q8', 'vq8']) {
    const s = await request(port, 'GET', `/v1/contexts/${ctx.id}/snapshot?precision=${precision}`);
    if (s.status !== 200) throw new Error(`snapshot ${precision}: ${s.status} ${s.body.toString()}`);
    const restores = [];
    for (let i = 0; i < reps; i++) {
      const r = await request(port, 'POST', '/v1/contexts/restore', s.body, 'application/octet-stream');
      if (r.status !== 201) throw new Error(`restore ${precision}: ${r.status} ${r.body.toString()}`);
      restores.push(r.ms);
      await request(port, 'DELETE', `/v1/contexts/${JSON.parse(r.body.toString()).id}`);
    }
    snapshots[precision] = { bytes: s.body.length, bytesPerToken: s.body.length / ctx.tokens, snapshotMs: s.ms, restoreMs: median(restores) };
  }
  await request(port, 'DELETE', `/v1/contexts/${ctx.id}`);
  const prefillMs = median(prefills);
  return {
    target,
    tokens: ctx.tokens,
    pages: ctx.pages,
    forkMs: median(forkMs),
    forkMsRange: [Math.min(...forkMs), Math.max(...forkMs)],
    forkWallMs: median(forkWall),
    fork64Ms: f64.fork_ms,
    copiedPagesOnFork: copiedPages,
    prefillMs,
    restoreMs: snapshots.f32.restoreMs,
    restoreSpeedup: prefillMs / snapshots.f32.restoreMs,
    snapshots,
  };
}

const f = (x, d = 1) => (x === undefined ? '-' : x.toFixed(d));

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const model = o.model ?? ensureModel('llama-tiny', { nCtx: CTX, quiet: false });
  const port = await freePort();
  const cmd = o.svcCmd.replaceAll('{model}', model).replaceAll('{host}', HOST).replaceAll('{port}', String(port)).replaceAll('{threads}', String(o.threads));
  const logFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-ctx-')), 'svc.log');
  console.log(`$ ${cmd}`);
  const srv = await startServer({ name: 'svc', argv: splitCmd(cmd), port, healthPaths: ['/healthz'], logFile, timeoutS: 120 });
  const load0 = os.loadavg()[0];
  const rows = [];
  try {
    const perStory = await tokensPerStory(port);
    for (const target of o.lengths) {
      const r = await measureLength(port, target, o.reps, perStory);
      rows.push(r);
      console.log(`${r.tokens} tokens: fork ${f(r.forkMs, 3)} ms, restore ${f(r.restoreMs)} ms vs prefill ${f(r.prefillMs)} ms`);
    }
  } finally {
    await stopServer(srv);
  }
  console.log('\n| tokens | pages | fork_ms (server) | fork HTTP ms | fork n=64 ms | pages copied | re-prefill ms | restore ms (f32) | speed-up | f32 bytes | q8 bytes | vq8 bytes |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const s = r.snapshots;
    console.log(`| ${r.tokens} | ${r.pages} | ${f(r.forkMs, 3)} | ${f(r.forkWallMs)} | ${f(r.fork64Ms, 2)} | ${r.copiedPagesOnFork} | ${f(r.prefillMs)} | ${f(r.restoreMs)} | ${f(r.restoreSpeedup)}× | ${s.f32.bytes} | ${s.q8.bytes} | ${s.vq8.bytes} |`);
  }
  const result = { date: new Date().toISOString(), command: cmd, model, host: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, loadavg: [load0, os.loadavg()[0]] }, reps: o.reps, rows, log: logFile };
  if (o.write) {
    const out = o.out ?? path.join(HERE, 'results', `contexts-${result.date.replace(/[:.]/g, '-')}.json`);
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, JSON.stringify(result, null, 2));
    console.log(`\nwrote ${out}`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
