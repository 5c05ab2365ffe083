#!/usr/bin/env node
// Builds the native engine addon (native/<backend>) against the pinned llama.cpp.
//   node scripts/build-native.mjs [--backend cpu|cuda|metal] [--portable] [--if-needed] [--jobs N]
//        [--cmake KEY=VALUE ...] [--reference-tools]
// --cmake passes extra cache entries (e.g. GGML_AVX2=ON for a portable CUDA build);
// --reference-tools also builds llama-server and llama-bench from the same tree
// into build/native/<backend>/ref/ (used by bench/ on accelerator machines).
// Output: build/native/<backend>/svc_engine.node + stamp.json.
// Build tree lives outside the repo in ${SVC_CACHE_DIR:-~/.cache/svc}/build/<backend>-<hash>
// so incremental rebuilds reuse it across clean checkouts.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const LLAMA_COMMIT = '80fb11a';
const NODE_LLAMA_CPP = 'node-llama-cpp@3.21.1';
const BACKENDS = ['cpu', 'cuda', 'metal'];

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cacheDir = process.env.SVC_CACHE_DIR || path.join(os.homedir(), '.cache', 'svc');
const srcDir = path.join(cacheDir, 'src', 'llama.cpp');

function parseArgs(argv) {
  const o = { backend: 'cpu', portable: false, ifNeeded: false, cmake: [], referenceTools: false, jobs: os.availableParallelism?.() ?? os.cpus().length };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[++i];
      if (v === undefined) die(`missing value for ${a}`);
      return v;
    };
    if (a === '--backend' || a.startsWith('--backend=')) o.backend = val();
    else if (a === '--jobs' || a.startsWith('--jobs=')) o.jobs = Number(val());
    else if (a === '--cmake' || a.startsWith('--cmake=')) {
      const kv = val();
      if (!/^[A-Z][A-Z0-9_]*=[^\s]*$/.test(kv)) die(`--cmake wants KEY=VALUE, got ${kv}`);
      o.cmake.push(kv);
    } else if (a === '--reference-tools') o.referenceTools = true;
    else if (a === '--portable') o.portable = true;
    else if (a === '--if-needed') o.ifNeeded = true;
    else if (a === '-h' || a === '--help') {
      console.log('usage: build-native.mjs [--backend cpu|cuda|metal] [--portable] [--if-needed] [--jobs N]');
      process.exit(0);
    } else die(`unknown argument: ${a}`);
  }
  if (!BACKENDS.includes(o.backend)) die(`--backend must be one of ${BACKENDS.join(', ')}`);
  if (!Number.isInteger(o.jobs) || o.jobs < 1) die('--jobs must be a positive integer');
  return o;
}

function die(msg, code = 1) {
  console.error(`build-native: ${msg}`);
  process.exit(code);
}
const log = (msg) => console.log(`[build-native] ${msg}`);

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...opts });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}): ${(r.stderr || '').trim()}`);
  return (r.stdout || '').trim();
}

function headOf(dir) {
  try {
    return run('git', ['-C', dir, 'rev-parse', 'HEAD']);
  } catch {
    return null;
  }
}

// Fetch the llama.cpp release node-llama-cpp pins (its git bundle), atomically.
function ensureSource() {
  const head = fs.existsSync(srcDir) ? headOf(srcDir) : null;
  if (head && head.startsWith(LLAMA_COMMIT)) {
    applyPatches(srcDir);
    return head;
  }
  log(`fetching llama.cpp ${LLAMA_COMMIT} via npm pack ${NODE_LLAMA_CPP}`);
  fs.mkdirSync(path.dirname(srcDir), { recursive: true });
  const tmp = fs.mkdtempSync(path.join(path.dirname(srcDir), '.fetch-'));
  try {
    const tgz = run('npm', ['pack', NODE_LLAMA_CPP, '--silent', '--pack-destination', tmp], { cwd: tmp }).split('\n').pop();
    run('tar', ['-xzf', path.join(tmp, tgz), '-C', tmp, 'package/llama/gitRelease.bundle']);
    const clone = path.join(tmp, 'llama.cpp');
    run('git', ['clone', '--quiet', path.join(tmp, 'package/llama/gitRelease.bundle'), clone]);
    const got = headOf(clone);
    if (!got || !got.startsWith(LLAMA_COMMIT)) throw new Error(`bundle HEAD is ${got}, expected ${LLAMA_COMMIT}`);
    if (fs.existsSync(srcDir)) fs.renameSync(srcDir, `${srcDir}.old-${Date.now()}`);
    fs.renameSync(clone, srcDir);
    applyPatches(srcDir);
    return got;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

// native/patches/*.patch: performance fixes to the pinned source (see native/patches/README.md),
// applied once; a tree that already has a patch is left alone.
function applyPatches(dir) {
  const patchDir = path.join(repo, 'native', 'patches');
  if (!fs.existsSync(patchDir)) return;
  for (const name of fs.readdirSync(patchDir).filter((n) => n.endsWith('.patch')).sort()) {
    const patch = path.join(patchDir, name);
    const check = spawnSync('git', ['apply', '--reverse', '--check', patch], { cwd: dir, stdio: 'ignore' });
    if (check.status === 0) continue;
    log(`applying ${name}`);
    run('git', ['apply', patch], { cwd: dir });
  }
}

// Hash of the native/ inputs of a build (CMake files, package markers, addon
// sources); scripts such as native/smoke.mjs do not count.
function nativeSourceHash() {
  const h = createHash('sha256');
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && /(\.(cpp|cc|c|h|hpp|cmake|json|patch)|CMakeLists\.txt)$/.test(e.name)) h.update(path.relative(repo, p)).update('\0').update(fs.readFileSync(p)).update('\0');
    }
  };
  walk(path.join(repo, 'native'));
  return h.digest('hex').slice(0, 16);
}

function tail(file, n = 60) {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-n).join('\n');
  } catch {
    return '(no log)';
  }
}

function cmakeJs(args, logFile) {
  return new Promise((resolve) => {
    const out = fs.openSync(logFile, 'a');
    fs.writeSync(out, `\n$ cmake-js ${args.join(' ')}\n`);
    const child = spawn(process.execPath, [path.join(repo, 'node_modules/cmake-js/bin/cmake-js'), ...args], {
      cwd: repo,
      stdio: ['ignore', out, out],
    });
    child.on('close', (code) => {
      fs.closeSync(out);
      resolve(code ?? 1);
    });
  });
}

function findAddon(buildDir) {
  for (const p of [path.join(buildDir, 'Release', 'svc_engine.node'), path.join(buildDir, 'svc_engine.node')]) {
    if (fs.existsSync(p)) return p;
  }
  return null;
}

// llama-server and llama-bench from the addon's own tree (same ggml objects).
function buildReferenceTools(buildDir, outDir, jobs, logFile) {
  const targets = ['llama-server', 'llama-bench'];
  log(`building reference tools ${targets.join(', ')}`);
  const out = fs.openSync(logFile, 'a');
  const r = spawnSync('cmake', ['--build', buildDir, '--config', 'Release', '--parallel', String(jobs), '--target', ...targets], {
    stdio: ['ignore', out, out],
  });
  fs.closeSync(out);
  if (r.status !== 0) {
    console.error(tail(logFile));
    die(`reference tools failed to build; full log: ${logFile}`);
  }
  const refDir = path.join(outDir, 'ref');
  fs.mkdirSync(refDir, { recursive: true });
  for (const t of targets) {
    const found = [path.join(buildDir, 'bin', t), path.join(buildDir, 'Release', t), path.join(buildDir, 'llama.cpp', 'bin', t)].find((p) => fs.existsSync(p));
    if (!found) die(`built ${t} but cannot find it under ${buildDir}`);
    fs.copyFileSync(found, path.join(refDir, t));
    fs.chmodSync(path.join(refDir, t), 0o755);
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const outDir = path.join(repo, 'build', 'native', opts.backend);
  const outFile = path.join(outDir, 'svc_engine.node');
  const stampFile = path.join(outDir, 'stamp.json');

  if (opts.backend === 'metal' && process.platform !== 'darwin') die('the metal backend builds only on macOS');
  if (opts.backend === 'cuda' && spawnSync('nvcc', ['--version']).status !== 0) {
    die('the cuda backend needs the CUDA toolkit: `nvcc` was not found on PATH (install CUDA or set PATH)');
  }

  const sourceHash = nativeSourceHash();
  if (opts.ifNeeded && fs.existsSync(outFile) && fs.existsSync(stampFile)) {
    try {
      const s = JSON.parse(fs.readFileSync(stampFile, 'utf8'));
      if (String(s.llamaCommit).startsWith(LLAMA_COMMIT) && s.backend === opts.backend &&
          s.portable === opts.portable && s.sourceHash === sourceHash) {
        log(`${path.relative(repo, outFile)} is up to date`);
        return;
      }
    } catch {
      /* rebuild */
    }
  }

  const llamaCommit = ensureSource();
  const cmakeFlags = [`SVC_NATIVE=${opts.portable ? 'OFF' : 'ON'}`];
  if (opts.backend === 'cuda' && process.env.SVC_CUDA_ARCHS) cmakeFlags.push(`SVC_CUDA_ARCHS=${process.env.SVC_CUDA_ARCHS}`);
  if (opts.referenceTools) cmakeFlags.push('SVC_REFERENCE_TOOLS=ON');
  cmakeFlags.push(...opts.cmake);
  const key = createHash('sha256').update(JSON.stringify([llamaCommit, opts.backend, opts.portable, cmakeFlags])).digest('hex').slice(0, 12);
  const buildDir = path.join(cacheDir, 'build', `${opts.backend}-${key}`);
  fs.mkdirSync(buildDir, { recursive: true });
  const logFile = path.join(buildDir, 'build.log');
  fs.writeFileSync(logFile, `# ${new Date().toISOString()} ${opts.backend} portable=${opts.portable}\n`);

  const args = [
    'build', '--out', buildDir, '-d', path.join('native', opts.backend), '--config', 'Release',
    '--parallel', String(opts.jobs), `--CDLLAMA_SRC_DIR=${srcDir}`, ...cmakeFlags.map((f) => `--CD${f}`),
  ];
  log(`building ${opts.backend}${opts.portable ? ' (portable)' : ''} in ${buildDir} with ${opts.jobs} jobs (log: ${logFile})`);
  const t0 = Date.now();
  const code = await cmakeJs(args, logFile);
  const addon = findAddon(buildDir);
  if (code !== 0 || !addon) {
    console.error(tail(logFile));
    die(`build failed (exit ${code}); full log: ${logFile}`);
  }
  fs.mkdirSync(outDir, { recursive: true });
  if (opts.referenceTools) buildReferenceTools(buildDir, outDir, opts.jobs, logFile);
  // Copy via a temp name so a running process never sees a half-written file.
  fs.copyFileSync(addon, `${outFile}.tmp`);
  fs.renameSync(`${outFile}.tmp`, outFile);
  const stamp = { llamaCommit, backend: opts.backend, portable: opts.portable, sourceHash, builtAt: new Date().toISOString() };
  fs.writeFileSync(stampFile, JSON.stringify(stamp, null, 2) + '\n');
  log(`done in ${((Date.now() - t0) / 1000).toFixed(1)}s -> ${path.relative(repo, outFile)}`);
}

main().catch((e) => die(e?.stack || String(e)));
