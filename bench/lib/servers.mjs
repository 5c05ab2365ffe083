// Server processes: the command line for each server, start (until healthy) and stop.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { HOST } from '../net.mjs';
import { refBin } from '../build-reference.mjs';

// Servers run from the repository root, so relative paths in --svc-cmd (bin/svc.js) resolve.
const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export function splitCmd(cmd) {
  // whitespace split with simple '...' / "..." quoting
  const out = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let m;
  while ((m = re.exec(cmd))) out.push(m[1] ?? m[2] ?? m[3]);
  return out;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function httpGetStatus(port, p) {
  return new Promise((resolve) => {
    const req = http.get({ host: HOST, port, path: p, timeout: 2000, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on('error', () => resolve(0));
    req.on('timeout', () => { req.destroy(); resolve(0); });
  });
}

/** argv for `kind` ('llama' or 'svc') serving `modelPath` on `port`. */
export function serverArgv(kind, modelPath, port, opts) {
  if (kind === 'llama') {
    const bin = opts.llamaServer || refBin('llama-server');
    if (!fs.existsSync(bin)) throw new Error(`llama-server not found at ${bin}; run node bench/build-reference.mjs (or pass --llama-server)`);
    return [bin, '-m', modelPath, '--host', HOST, '--port', String(port), '-np', String(opts.parallel),
      '-t', String(opts.threads), '-tb', String(opts.threads), '-c', String(opts.ctx), '--no-webui',
      ...(opts.llamaHugePages ? ['--no-mmap'] : []), ...splitCmd(opts.llamaExtra)];
  }
  // slot_ctx: positions per request, llama-server's per-slot share of -c (svc's -ctx-size is per request)
  const sub = { model: modelPath, host: HOST, port: String(port), threads: String(opts.threads), parallel: String(opts.parallel), ctx: String(opts.ctx), slot_ctx: String(Math.floor(opts.ctx / opts.parallel)) };
  return splitCmd(opts.svcCmd).map((t) => t.replace(/\{(\w+)\}/g, (m, k) => (k in sub ? sub[k] : m)));
}

/**
 * Environment additions for `kind`. --llama-huge-pages gives llama-server what svc's
 * -huge-pages does by default on a CPU (weights read, not mapped, onto 2 MiB pages):
 * --no-mmap above, and glibc advising every large allocation onto huge pages. Then what
 * --llama-env / --svc-env add for that server alone.
 */
export function serverEnv(kind, opts) {
  const huge = kind === 'llama' && opts.llamaHugePages ? { GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1' } : {};
  return { ...huge, ...((kind === 'llama' ? opts.llamaEnv : opts.svcEnv) ?? {}) };
}

/** `K=V` from --llama-env / --svc-env into `into` (the flags repeat). */
export function addEnvArg(into, kv) {
  const i = kv.indexOf('=');
  if (i <= 0) throw new Error(`expected NAME=VALUE, got ${kv}`);
  into[kv.slice(0, i)] = kv.slice(i + 1);
  return into;
}

/** The command as a shell would read it: environment additions, then argv. */
export function commandLine(argv, env = {}) {
  return [...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...argv].join(' ');
}

export async function startServer({ name, argv, port, healthPaths, logFile, timeoutS, env = {} }) {
  const log = fs.openSync(logFile, 'w');
  fs.writeSync(log, `$ ${commandLine(argv, env)}\n`);
  const child = spawn(argv[0], argv.slice(1), { cwd: REPO_ROOT, stdio: ['ignore', log, log], env: { ...process.env, ...env } });
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

export async function stopServer(srv) {
  const { child } = srv;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const done = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await done;
  clearTimeout(t);
}

/**
 * MiB of the server's memory on 2 MiB pages at the end of a repetition: anonymous
 * (svc's weights with -huge-pages, llama-server's with --llama-huge-pages) plus file
 * pages mapped huge (what the page cache happened to hold in large folios). Linux only.
 */
export function hugePagesMiB(srv) {
  try {
    const roll = fs.readFileSync(`/proc/${srv.child.pid}/smaps_rollup`, 'utf8');
    const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+) kB$`, 'm').exec(roll)?.[1] ?? 0);
    return +((kb('AnonHugePages') + kb('FilePmdMapped')) / 1024).toFixed(1);
  } catch {
    return null;
  }
}

/**
 * Empties the kernel's page cache (needs root), so the next server reads its model cold,
 * as after a reboot. A mapped model runs at a speed that depends on the page cache: read
 * cold through the mapping, the 0.5B model's file came back 436 of ~510 MiB in 2 MiB
 * folios, mapped huge; once another process had read it with read() (svc loads it so,
 * and hashes it), 0 MiB, and llama-server decoded 24–27 ms per token instead of ~22.
 * Returns whether it was done.
 */
export function dropPageCache() {
  try {
    spawnSync('sync');
    fs.writeFileSync('/proc/sys/vm/drop_caches', '3');
    return true;
  } catch {
    return false;
  }
}

/** A running server's peak resident memory so far, MiB (Linux: VmHWM in /proc; null elsewhere). */
export function peakRssMiB(srv) {
  try {
    const m = /^VmHWM:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${srv.child.pid}/status`, 'utf8'));
    return m ? +(Number(m[1]) / 1024).toFixed(1) : null;
  } catch {
    return null;
  }
}
