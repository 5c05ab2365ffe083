#!/usr/bin/env node
// Bursts of concurrent sampled streams after a long run of sequential ones: the load that
// crashed svc on an H200 with CUDA graphs on every step ("an illegal instruction was
// encountered", 5 runs of 5, within the first 5 bursts; llama.cpp patch 0007). Not a speed
// figure: whether each server stays up, with its throughput per burst beside it.
//
//   node bench/stress-bursts.mjs [--models stories] [--only svc|llama] [--threads N]
//        [--warm 300] [--bursts 10] [--streams 8] [--tokens 256] [--temperature 0.8]
//        [--svc-cmd '...'] [--llama-server PATH] [--llama-extra ARGS] [--llama-env K=V] [--svc-env K=V]
//        [--label NAME]
//
// Exits 1 when a server died or a request failed. The server commands take the same
// placeholders as bench/run.mjs.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { HOST, freePort } from './net.mjs';
import { addEnvArg, commandLine, serverArgv, serverEnv, startServer, stopServer } from './lib/servers.mjs';
import { realModel, ensureModel } from '../test/fixtures/models.mjs';

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
/** Every value of a repeated flag. */
const opts = (name) => args.flatMap((a, i) => (a === name && i + 1 < args.length ? [args[i + 1]] : []));
const o = {
  models: opt('--models', 'stories').split(','),
  only: opt('--only', null),
  threads: Number(opt('--threads', String(Math.min(8, os.availableParallelism())))),
  warm: Number(opt('--warm', '300')),
  bursts: Number(opt('--bursts', '10')),
  parallel: Number(opt('--streams', '8')),
  tokens: Number(opt('--tokens', '256')),
  temperature: Number(opt('--temperature', '0.8')),
  ctx: 8192,
  svcCmd: opt('--svc-cmd', 'node bin/svc.js -m {model} -addr {host}:{port} -threads {threads} -concurrency {parallel} -ctx-size {slot_ctx}'),
  llamaServer: opt('--llama-server', null),
  llamaExtra: opt('--llama-extra', ''),
  llamaEnv: opts('--llama-env').reduce(addEnvArg, {}),
  svcEnv: opts('--svc-env').reduce(addEnvArg, {}),
  label: opt('--label', ''),
};
const MODELS = {
  stories: () => realModel('stories260K.gguf'),
  qwen05b: () => ensureModel('qwen2-0.5b', { quiet: false }),
};

/** One streamed completion; resolves to the number of chunks, rejects on any failure. */
async function stream(port, k) {
  const res = await fetch(`http://${HOST}:${port}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: `${k} ${Math.random()} Once upon a time`, max_tokens: o.tokens, stream: true,
      temperature: o.temperature, ignore_eos: true, cache_prompt: false }),
  });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
  let text = '';
  for await (const c of res.body) text += Buffer.from(c).toString('utf8');
  if (!text.includes('[DONE]')) throw new Error('stream ended without [DONE]');
  return text.split('\ndata: ').length;
}

async function stress(kind, modelPath) {
  const port = await freePort();
  const tag = o.label ? `${kind} ${o.label}` : kind;
  const logFile = path.join(os.tmpdir(), `svc-stress-${kind}${o.label ? `-${o.label.replace(/\W+/g, '_')}` : ''}-${process.pid}.log`);
  const env = serverEnv(kind, o);
  const argv = serverArgv(kind, modelPath, port, o);
  console.log(`[${tag}] ${commandLine(argv, env)}`);
  const srv = await startServer({ name: kind, argv, port, healthPaths: ['/healthz', '/health'], logFile, timeoutS: 120, env });
  const t0 = performance.now();
  const at = () => `${((performance.now() - t0) / 1000).toFixed(1)} s`;
  let failure = null;
  const rates = [];
  try {
    for (let i = 0; i < o.warm; i++) await stream(port, i);
    console.log(`[${tag}] ${o.warm} sequential streams of ${o.tokens} tokens done at ${at()}`);
    for (let b = 0; b < o.bursts; b++) {
      const t = performance.now();
      await Promise.all(Array.from({ length: o.parallel }, (_, k) => stream(port, k)));
      rates.push((o.parallel * o.tokens) / ((performance.now() - t) / 1000));
    }
  } catch (e) {
    failure = `${e.message} at ${at()}, after ${rates.length} bursts`;
  }
  const died = srv.child.exitCode !== null || srv.child.signalCode !== null;
  await stopServer(srv);
  if (failure || died) {
    const tail = fs.readFileSync(logFile, 'utf8').split('\n').filter((l) => /error|abort/i.test(l)).slice(-4).join('\n');
    console.log(`[${tag}] FAILED: ${failure ?? 'server exited'}; log ${logFile}\n${tail}`);
    return false;
  }
  console.log(`[${tag}] ok: ${o.bursts} bursts of ${o.parallel} streams, ${rates.map((r) => r.toFixed(0)).join(' ')} t/s`);
  return true;
}

let ok = true;
for (const m of o.models) {
  const modelPath = await MODELS[m]();
  for (const kind of ['svc', 'llama']) {
    if (o.only && o.only !== kind) continue;
    ok = (await stress(kind, modelPath)) && ok;
  }
}
process.exit(ok ? 0 : 1);
