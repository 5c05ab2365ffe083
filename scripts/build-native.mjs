#!/usr/bin/env node
// Builds the native engine addon (native/<backend>) against the pinned llama.cpp,
// and the speech addon (native/whisper) against whisper.cpp 1.9.1.
//   node scripts/build-native.mjs [--backend cpu|cuda|metal] [--portable] [--if-needed] [--jobs N]
//        [--cmake KEY=VALUE ...] [--reference-tools] [--addon engine|whisper|all]
// --addon picks what to build (default: all for --backend cpu, the engine alone for
// cuda and metal: the whisper addon computes on the CPU whatever the backend).
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
const WHISPER_VERSION = '1.9.1';
const NODEJS_WHISPER = 'nodejs-whisper@0.3.1';
const ADDONS = ['engine', 'whisper', 'all'];
const TREE = 'llama+common+mtmd';
const BACKENDS = ['cpu', 'cuda', 'metal'];

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cacheDir = process.env.SVC_CACHE_DIR || path.join(os.homedir(), '.cache', 'svc');
const srcDir = path.join(cacheDir, 'src', 'llama.cpp');
const whisperSrcDir = path.join(cacheDir, 'src', `whisper.cpp-${WHISPER_VERSION}`);

function parseArgs(argv) {
  const o = { backend: 'cpu', portable: false, ifNeeded: false, cmake: [], referenceTools: false, addon: undefined, jobs: os.availableParallelism?.() ?? os.cpus().length };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[++i];
      if (v === undefined) die(`missing value for ${a}`);
      return v;
    };
    if (a === '--backend' || a.startsWith('--backend=')) o.backend = val();
    else if (a === '--addon' || a.startsWith('--addon=')) o.addon = val();
    else if (a === '--jobs' || a.startsWith('--jobs=')) o.jobs = Number(val());
    else if (a === '--cmake' || a.startsWith('--cmake=')) {
      const kv = val();
      if (!/^[A-Z][A-Z0-9_]*=[^\s]*$/.test(kv)) die(`--cmake wants KEY=VALUE, got ${kv}`);
      o.cmake.push(kv);
    } else if (a === '--reference-tools') o.referenceTools = true;
    else if (a === '--portable') o.portable = true;
    else if (a === '--if-needed') o.ifNeeded = true;
    else if (a === '-h' || a === '--help') {
      console.log('usage: build-native.mjs [--backend cpu|cuda|metal] [--portable] [--if-needed] [--jobs N] [--addon engine|whisper|all]');
      process.exit(0);
    } else die(`unknown argument: ${a}`);
  }
  if (!BACKENDS.includes(o.backend)) die(`--backend must be one of ${BACKENDS.join(', ')}`);
  o.addon ??= o.backend === 'cpu' ? 'all' : 'engine';
  if (!ADDONS.includes(o.addon)) die(`--addon must be one of ${ADDONS.join(', ')}`);
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
// sources); scripts such as native/smoke.mjs do not count. The whisper addon's
// folder is its own build's input only.
function nativeSourceHash(root = path.join(repo, 'native'), skip = [path.join(repo, 'native', 'whisper')]) {
  const h = createHash('sha256');
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) {
        if (!skip.includes(p)) walk(p);
      } else if (e.isFile() && /(\.(cpp|cc|c|h|hpp|cmake|json|patch)|CMakeLists\.txt)$/.test(e.name)) h.update(path.relative(repo, p)).update('\0').update(fs.readFileSync(p)).update('\0');
    }
  };
  walk(root);
  return h.digest('hex').slice(0, 16);
}

/**
 * The cached tree is shared by every checkout (worktrees included), but CMake remembers the one
 * that configured it, and `cmake-js build` only rebuilds: another checkout's build compiled the
 * first one's addon sources, silently. Its cache goes when it names another source folder, so
 * this build configures it for ours (llama.cpp's objects stay: their sources are the same files).
 */
function forgetOtherCheckout(buildDir, sourceDir) {
  const cache = path.join(buildDir, 'CMakeCache.txt');
  if (!fs.existsSync(cache)) return;
  const home = /^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$/m.exec(fs.readFileSync(cache, 'utf8'))?.[1];
  if (home === undefined || path.resolve(home) === path.resolve(sourceDir)) return;
  log(`${buildDir} was configured for ${home}: configuring it for ${sourceDir}`);
  fs.rmSync(cache, { force: true });
  fs.rmSync(path.join(buildDir, 'CMakeFiles'), { recursive: true, force: true });
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

function findAddon(buildDir, name = 'svc_engine.node') {
  for (const p of [path.join(buildDir, 'Release', name), path.join(buildDir, name)]) {
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
  if (opts.addon !== 'whisper') await buildEngine(opts);
  if (opts.addon !== 'engine') await buildWhisper(opts);
}

async function buildEngine(opts) {
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
  // TREE names the set of llama.cpp targets the tree builds (libmtmd since vision): a checkout
  // building other targets gets its own tree instead of reconfiguring a shared one back and forth.
  const key = createHash('sha256').update(JSON.stringify([llamaCommit, opts.backend, opts.portable, cmakeFlags, TREE])).digest('hex').slice(0, 12);
  const buildDir = path.join(cacheDir, 'build', `${opts.backend}-${key}`);
  fs.mkdirSync(buildDir, { recursive: true });
  forgetOtherCheckout(buildDir, path.join(repo, 'native', opts.backend));
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

// whisper.cpp as nodejs-whisper ships it (cpp/whisper.cpp), unpacked once into the cache, atomically.
function ensureWhisperSource() {
  const marker = path.join(whisperSrcDir, 'CMakeLists.txt');
  if (fs.existsSync(marker) && fs.readFileSync(marker, 'utf8').includes(`VERSION ${WHISPER_VERSION}`)) return;
  log(`fetching whisper.cpp ${WHISPER_VERSION} via npm pack ${NODEJS_WHISPER}`);
  fs.mkdirSync(path.dirname(whisperSrcDir), { recursive: true });
  const tmp = fs.mkdtempSync(path.join(path.dirname(whisperSrcDir), '.fetch-'));
  try {
    const tgz = run('npm', ['pack', NODEJS_WHISPER, '--silent', '--pack-destination', tmp], { cwd: tmp }).split('\n').pop();
    run('tar', ['-xzf', path.join(tmp, tgz), '-C', tmp, 'package/cpp/whisper.cpp']);
    const tree = path.join(tmp, 'package', 'cpp', 'whisper.cpp');
    if (!fs.readFileSync(path.join(tree, 'CMakeLists.txt'), 'utf8').includes(`VERSION ${WHISPER_VERSION}`)) throw new Error(`${NODEJS_WHISPER} does not hold whisper.cpp ${WHISPER_VERSION}`);
    fs.rmSync(whisperSrcDir, { recursive: true, force: true });
    fs.renameSync(tree, whisperSrcDir);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

// build/native/whisper/svc_whisper.node, and ref/whisper-cli from the same tree (the tests' reference).
async function buildWhisper(opts) {
  const outDir = path.join(repo, 'build', 'native', 'whisper');
  const outFile = path.join(outDir, 'svc_whisper.node');
  const stampFile = path.join(outDir, 'stamp.json');
  // Its folder and the CMake it shares with the engine (native/addon.cmake).
  const shared = fs.readFileSync(path.join(repo, 'native', 'addon.cmake'));
  const sourceHash = createHash('sha256').update(nativeSourceHash(path.join(repo, 'native', 'whisper'), [])).update(shared).digest('hex').slice(0, 16);
  if (opts.ifNeeded && fs.existsSync(outFile) && fs.existsSync(stampFile)) {
    try {
      const s = JSON.parse(fs.readFileSync(stampFile, 'utf8'));
      if (s.whisper === WHISPER_VERSION && s.portable === opts.portable && s.sourceHash === sourceHash) {
        log(`${path.relative(repo, outFile)} is up to date`);
        return;
      }
    } catch {
      /* rebuild */
    }
  }
  ensureWhisperSource();
  const cmakeFlags = [`SVC_NATIVE=${opts.portable ? 'OFF' : 'ON'}`];
  const key = createHash('sha256').update(JSON.stringify([WHISPER_VERSION, opts.portable, cmakeFlags])).digest('hex').slice(0, 12);
  const buildDir = path.join(cacheDir, 'build', `whisper-${key}`);
  fs.mkdirSync(buildDir, { recursive: true });
  forgetOtherCheckout(buildDir, path.join(repo, 'native', 'whisper'));
  const logFile = path.join(buildDir, 'build.log');
  fs.writeFileSync(logFile, `# ${new Date().toISOString()} whisper portable=${opts.portable}\n`);
  log(`building whisper in ${buildDir} with ${opts.jobs} jobs (log: ${logFile})`);
  const t0 = Date.now();
  const code = await cmakeJs(['build', '--out', buildDir, '-d', path.join('native', 'whisper'), '--config', 'Release', '--parallel', String(opts.jobs), `--CDWHISPER_SRC_DIR=${whisperSrcDir}`, ...cmakeFlags.map((f) => `--CD${f}`)], logFile);
  const addon = findAddon(buildDir, 'svc_whisper.node');
  if (code !== 0 || !addon) {
    console.error(tail(logFile));
    die(`whisper build failed (exit ${code}); full log: ${logFile}`);
  }
  const out = fs.openSync(logFile, 'a');
  const r = spawnSync('cmake', ['--build', buildDir, '--config', 'Release', '--parallel', String(opts.jobs), '--target', 'whisper-cli'], { stdio: ['ignore', out, out] });
  fs.closeSync(out);
  const cli = [path.join(buildDir, 'whisper-cli'), path.join(buildDir, 'bin', 'whisper-cli'), path.join(buildDir, 'Release', 'whisper-cli')].find((p) => fs.existsSync(p));
  if (r.status !== 0 || !cli) {
    console.error(tail(logFile));
    die(`whisper-cli failed to build; full log: ${logFile}`);
  }
  fs.mkdirSync(path.join(outDir, 'ref'), { recursive: true });
  fs.copyFileSync(cli, path.join(outDir, 'ref', 'whisper-cli'));
  fs.chmodSync(path.join(outDir, 'ref', 'whisper-cli'), 0o755);
  fs.copyFileSync(addon, `${outFile}.tmp`);
  fs.renameSync(`${outFile}.tmp`, outFile);
  fs.writeFileSync(stampFile, JSON.stringify({ whisper: WHISPER_VERSION, portable: opts.portable, sourceHash, builtAt: new Date().toISOString() }, null, 2) + '\n');
  log(`done in ${((Date.now() - t0) / 1000).toFixed(1)}s -> ${path.relative(repo, outFile)}`);
}

main().catch((e) => die(e?.stack || String(e)));
