// What the engine-alone benchmarks (bench/sampling.mjs, bench/resident.mjs) share:
// their common options and the native addon they load. No HTTP.
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * Options from argv: opt(name, default) for a script's own, plus the common
 * --backend (cpu), --threads (every CPU) and --reps (repsDefault).
 */
export function engineOptions(repsDefault) {
  const args = process.argv.slice(2);
  const opt = (name, def) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : def;
  };
  return {
    opt,
    backend: opt('--backend', 'cpu'),
    threads: Number(opt('--threads', String(os.availableParallelism()))),
    reps: Number(opt('--reps', String(repsDefault))),
  };
}

/** The addon built for `backend` (scripts/build-native.mjs). */
export function loadAddon(backend) {
  return createRequire(import.meta.url)(path.join(repo, 'build', 'native', backend, 'svc_engine.node'));
}

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
