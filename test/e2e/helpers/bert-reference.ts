import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './fixtures';

/**
 * Sentence embeddings of token lists computed in numpy from the model file's own weights
 * (test/fixtures/bert_reference.py): an engine-independent reference for the encoder path.
 */
export function bertReference(model: string, tokenLists: number[][]): number[][] {
  const llamaSrc = process.env.SVC_LLAMA_SRC ?? join(process.env.SVC_CACHE_DIR ?? join(require('node:os').homedir(), '.cache', 'svc'), 'src', 'llama.cpp');
  const args = [join(ROOT, 'test', 'fixtures', 'bert_reference.py'), '--model', model, ...tokenLists.flatMap((t) => ['--tokens', t.join(',')])];
  const env = { ...process.env, PYTHONPATH: [join(llamaSrc, 'gguf-py'), process.env.PYTHONPATH].filter(Boolean).join(':') };
  return JSON.parse(execFileSync(process.env.SVC_PYTHON ?? 'python3', args, { env, encoding: 'utf8', timeout: 120_000 }));
}

export function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}
