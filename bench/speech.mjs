#!/usr/bin/env node
// Speech-to-text benchmark: svc's /v1/audio/transcriptions against whisper.cpp's own whisper-cli
// (built from the same tree, build/native/whisper/ref/), same model, same file, same threads,
// greedy at temperature 0 without fallback. For svc: the HTTP round trip of a multipart upload
// and the whisper_full time it reports (X-Svc-Transcribe-Ms); for whisper-cli: the total minus
// the model load from its own timing print (a CLI loads the model every run). Checks that both
// write the same text.
//
//   node bench/speech.mjs [--model PATH | --kind whisper-tiny] [--seconds 30] [--threads N] [--reps 5]
//                         [--out FILE] [--no-write]
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, HOST } from './net.mjs';
import { ensureModel } from '../test/fixtures/models.mjs';
import { startServer, stopServer } from './lib/servers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CLI = path.join(HERE, '..', 'build', 'native', 'whisper', 'ref', 'whisper-cli');

function parseArgs(argv) {
  const o = { model: null, kind: 'whisper-tiny', seconds: 30, threads: os.cpus().length, reps: 5, out: null, write: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    if (a === '--model') o.model = v();
    else if (a === '--kind') o.kind = v();
    else if (a === '--seconds') o.seconds = Number(v());
    else if (a === '--threads') o.threads = Number(v());
    else if (a === '--reps') o.reps = Number(v());
    else if (a === '--out') o.out = v();
    else if (a === '--no-write') o.write = false;
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** 16 kHz mono 16-bit PCM: a gliding tone over seeded noise. */
function wav(seconds) {
  const rate = 16000;
  const n = Math.floor(seconds * rate);
  const data = Buffer.alloc(n * 2);
  let s = 1;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) % 2147483648;
    const t = i / rate;
    const v = 0.3 * Math.sin(2 * Math.PI * (200 + 50 * (t % 4)) * t) + 0.05 * ((s / 2147483648) * 2 - 1);
    data.writeInt16LE(Math.round(v * 32767), i * 2);
  }
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVEfmt ', 8, 'latin1');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

function runCli(model, file, threads) {
  const out = path.join(path.dirname(file), 'cli');
  const r = spawnSync(CLI, ['-m', model, '-f', file, '-t', String(threads), '-l', 'en', '-bs', '1', '-bo', '1', '-tp', '0', '-nf', '-oj', '-of', out], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`whisper-cli failed: ${r.stderr.slice(-500)}`);
  const ms = (label) => Number(new RegExp(`${label}\\s*=\\s*([\\d.]+) ms`).exec(r.stderr)?.[1] ?? NaN);
  // Its JSON output, not its console lines: a segment's text may hold a newline.
  const segments = JSON.parse(fs.readFileSync(`${out}.json`, 'utf8')).transcription;
  return { text: segments.map((x) => x.text).join('').replace(/\s+/g, ' ').trim(), ms: ms('total time') - ms('load time') };
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(CLI)) throw new Error(`${CLI} is missing: node scripts/build-native.mjs --addon whisper`);
  const model = o.model ?? ensureModel(o.kind);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-speech-bench-'));
  const file = path.join(dir, 'audio.wav');
  const audio = wav(o.seconds);
  fs.writeFileSync(file, audio);

  const cli = [];
  let cliText = '';
  for (let i = 0; i < o.reps; i++) {
    const r = runCli(model, file, o.threads);
    cli.push(r.ms);
    cliText = r.text;
  }

  const port = await freePort();
  const argv = [process.execPath, 'bin/svc.js', '-addr', `${HOST}:${port}`, '-store', path.join(dir, 'store'), '-whisper', '-whisper-model', model, '-threads', String(o.threads)];
  const srv = await startServer({ name: 'svc', argv, port, healthPaths: ['/healthz'], logFile: path.join(dir, 'svc.log'), timeoutS: 120 });
  const wall = [];
  const engine = [];
  let svcText = '';
  try {
    for (let i = 0; i <= o.reps; i++) {
      const form = new FormData();
      form.append('model', 'whisper-1');
      form.append('language', 'en');
      form.append('file', new Blob([audio]), 'audio.wav');
      const t0 = performance.now();
      const res = await fetch(`http://${HOST}:${port}/v1/audio/transcriptions`, { method: 'POST', body: form });
      const body = await res.json();
      if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${JSON.stringify(body)}`);
      // The first request warms the process (V8, the state's first buffers): not counted.
      if (i === 0) continue;
      wall.push(performance.now() - t0);
      engine.push(Number(res.headers.get('x-svc-transcribe-ms')));
      svcText = body.text;
    }
  } finally {
    await stopServer(srv);
  }
  const result = {
    date: new Date().toISOString(),
    model: path.basename(model),
    audioSeconds: o.seconds,
    threads: o.threads,
    reps: o.reps,
    whisperCliMs: median(cli),
    svcTranscribeMs: median(engine),
    svcHttpMs: median(wall),
    ratioHttpVsCli: median(cli) / median(wall),
    sameText: svcText.replace(/\s+/g, ' ').trim() === cliText,
  };
  console.log(JSON.stringify(result, null, 2));
  if (o.write) {
    const out = o.out ?? path.join(HERE, 'results', `speech-${result.date.replace(/[:.]/g, '-')}.json`);
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, JSON.stringify(result, null, 2));
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
