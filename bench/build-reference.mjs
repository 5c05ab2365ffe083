#!/usr/bin/env node
// Builds llama.cpp's own reference binaries (llama-server, llama-bench and a greedy
// completion tool) from the pinned llama.cpp source, for benchmarks and exactness
// references. Output: ${SVC_CACHE_DIR:-~/.cache/svc}/build/ref-<backend>/bin.
//
//   node bench/build-reference.mjs [--backend cpu|cuda] [--src DIR] [--jobs N] [--force] [--print-bin-dir]
//
// The build is skipped when all binaries exist and the stamp (source commit +
// cmake flags + targets) matches. Exports helpers for other scripts.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export function svcCacheDir() {
  return process.env.SVC_CACHE_DIR || path.join(os.homedir(), '.cache', 'svc');
}

export function llamaSrcDir() {
  return process.env.SVC_LLAMA_SRC || path.join(svcCacheDir(), 'src', 'llama.cpp');
}

export function refBuildDir(backend = 'cpu') {
  return path.join(svcCacheDir(), 'build', `ref-${backend}`);
}

// Greedy completion tool: the first of these that this llama.cpp release has.
const COMPLETION_CANDIDATES = [
  { target: 'llama-completion', dir: 'tools/completion' },
  { target: 'llama-simple', dir: 'examples/simple' },
  { target: 'llama-cli', dir: 'tools/cli' },
];

export function completionTool(src = llamaSrcDir()) {
  for (const c of COMPLETION_CANDIDATES) {
    if (fs.existsSync(path.join(src, c.dir, 'CMakeLists.txt'))) return c.target;
  }
  throw new Error(`no completion tool found in ${src}`);
}

export function refTargets(src = llamaSrcDir()) {
  return ['llama-server', 'llama-bench', completionTool(src)];
}

/** Path of a reference binary (may not exist). */
export function refBin(name, backend = 'cpu') {
  return path.join(refBuildDir(backend), 'bin', name);
}

export function llamaCommit(src = llamaSrcDir()) {
  const r = spawnSync('git', ['-C', src, 'rev-parse', 'HEAD'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : 'unknown';
}

function cmakeFlags(backend) {
  const flags = [
    '-DCMAKE_BUILD_TYPE=Release',
    '-DBUILD_SHARED_LIBS=OFF',
    '-DGGML_NATIVE=ON',
    '-DLLAMA_CURL=OFF',
    '-DLLAMA_OPENSSL=OFF',
    '-DLLAMA_BUILD_TESTS=OFF',
    '-DLLAMA_BUILD_UI=OFF',
    '-DLLAMA_USE_PREBUILT_UI=OFF', // would fetch UI assets from Hugging Face at build time
  ];
  if (backend === 'cuda') flags.push('-DGGML_CUDA=ON');
  return flags;
}

function run(cmd, args, opts = {}) {
  console.error(`+ ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { stdio: 'inherit', ...opts });
  if (r.status !== 0) throw new Error(`${cmd} failed with status ${r.status}`);
}

export function buildReference({ backend = 'cpu', src = llamaSrcDir(), jobs = os.cpus().length, force = false } = {}) {
  if (!['cpu', 'cuda'].includes(backend)) throw new Error(`unknown backend ${backend}`);
  if (!fs.existsSync(path.join(src, 'CMakeLists.txt'))) {
    throw new Error(`llama.cpp source not found at ${src} (set SVC_LLAMA_SRC)`);
  }
  const buildDir = refBuildDir(backend);
  const targets = refTargets(src);
  const flags = cmakeFlags(backend);
  // native/patches applied to the tree (scripts/build-native.mjs) change the stamp too.
  const patched = createHash('sha256').update(spawnSync('git', ['diff'], { cwd: src, encoding: 'utf8' }).stdout ?? '').digest('hex').slice(0, 16);
  const stamp = JSON.stringify({ commit: llamaCommit(src), src, flags, targets, patched });
  const stampFile = path.join(buildDir, 'svc-ref.stamp');
  const haveAll = targets.every((t) => fs.existsSync(refBin(t, backend)));
  if (!force && haveAll && fs.existsSync(stampFile) && fs.readFileSync(stampFile, 'utf8') === stamp) {
    console.error(`reference build up to date: ${path.join(buildDir, 'bin')}`);
    return { binDir: path.join(buildDir, 'bin'), targets, skipped: true };
  }
  fs.mkdirSync(buildDir, { recursive: true });
  const gen = spawnSync('ninja', ['--version']).status === 0 ? ['-G', 'Ninja'] : [];
  // A cache from a different generator cannot be reused.
  const cache = path.join(buildDir, 'CMakeCache.txt');
  if (fs.existsSync(cache)) {
    const txt = fs.readFileSync(cache, 'utf8');
    const wantNinja = gen.length > 0;
    if (wantNinja !== /CMAKE_GENERATOR:INTERNAL=Ninja/.test(txt)) fs.rmSync(cache);
  }
  const t0 = Date.now();
  run('cmake', ['-S', src, '-B', buildDir, ...gen, ...flags]);
  run('cmake', ['--build', buildDir, '--config', 'Release', '-j', String(jobs), '--target', ...targets]);
  for (const t of targets) {
    if (!fs.existsSync(refBin(t, backend))) throw new Error(`build finished but ${refBin(t, backend)} is missing`);
  }
  fs.writeFileSync(stampFile, stamp);
  console.error(`built ${targets.join(', ')} in ${((Date.now() - t0) / 1000).toFixed(0)} s -> ${path.join(buildDir, 'bin')}`);
  return { binDir: path.join(buildDir, 'bin'), targets, skipped: false };
}

function parseArgs(argv) {
  const o = { backend: 'cpu', force: false, printBinDir: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--backend') o.backend = argv[++i];
    else if (a === '--src') o.src = argv[++i];
    else if (a === '--jobs' || a === '-j') o.jobs = Number(argv[++i]);
    else if (a === '--force') o.force = true;
    else if (a === '--print-bin-dir') o.printBinDir = true;
    else if (a === '-h' || a === '--help') {
      console.log('usage: node bench/build-reference.mjs [--backend cpu|cuda] [--src DIR] [--jobs N] [--force] [--print-bin-dir]');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const o = parseArgs(process.argv.slice(2));
    if (o.printBinDir) {
      console.log(path.join(refBuildDir(o.backend), 'bin'));
      process.exit(0);
    }
    const r = buildReference(o);
    console.log(r.binDir);
  } catch (e) {
    console.error(`build-reference: ${e.message}`);
    process.exit(1);
  }
}
