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
