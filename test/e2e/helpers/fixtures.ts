import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const ROOT = resolve(__dirname, '..', '..', '..');

/** The one configurable fixtures folder: $SVC_MODELS_DIR, else ../shared/models beside the repo. */
export function modelsDir(): string {
  return process.env.SVC_MODELS_DIR ?? resolve(ROOT, '..', 'shared', 'models');
}

export function fixtureModel(file: string): string {
  const p = join(modelsDir(), file);
  if (!existsSync(p)) throw new Error(`fixture model ${p} is missing (set SVC_MODELS_DIR)`);
  return p;
}

export const STORIES = 'stories260K.gguf';

/** A synthetic random-weight model (test/fixtures/models.mjs): generated once, then cached. */
export function syntheticModel(kind: 'qwen2-tiny' | 'qwen2.5-tiny' | 'llama-tiny' | 'llama3-tiny' | 'qwen2-0.5b' | 'coder-tiny' | 'thinker-tiny' | 'r1-tiny' | 'vision-tiny' | 'wide-heads-tiny' | 'bert-tiny' | 'bert-rerank-tiny' | 'whisper-tiny'): string {
  return execFileSync(process.execPath, [join(ROOT, 'test', 'fixtures', 'models.mjs'), kind], { encoding: 'utf8', timeout: 600_000 }).trim().split('\n').pop()!;
}
