#!/usr/bin/env node
// Exactness reference: greedy continuation of a prompt by llama.cpp's own completion tool
// (built by bench/build-reference.mjs from the pinned source).
//
//   node bench/reference-text.mjs                 # re-derive and compare with the stored file
//   node bench/reference-text.mjs --write         # (re)write the stored file
//   node bench/reference-text.mjs --print         # print the derived JSON only
//
// Stored at test/fixtures/reference/stories260K-once-upon-a-time.json as
// { command, llamaCommit, prompt, n_predict, text }, text being the continuation only
// (the prompt is not repeated). Exit status 0 when the derived text matches the stored one,
// 1 on mismatch, 2 when the reference binary is missing (a test should skip then).
//
// Exports deriveReference() / referenceAvailable() / REFERENCE_FILE for tests.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { completionTool, llamaCommit, refBin, llamaSrcDir } from './build-reference.mjs';
import { realModelPath } from '../test/fixtures/models.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = path.resolve(HERE, '..');
export const REFERENCE_FILE = path.join(REPO_ROOT, 'test', 'fixtures', 'reference', 'stories260K-once-upon-a-time.json');

export const REFERENCE_CASE = { model: 'stories260K.gguf', prompt: 'Once upon a time', n_predict: 48 };

function toolPath() {
  let tool;
  try {
    tool = completionTool(llamaSrcDir());
  } catch {
    tool = 'llama-completion';
  }
  return refBin(tool);
}

/** True when the reference completion binary and the model file are both present. */
export function referenceAvailable() {
  return fs.existsSync(toolPath()) && realModelPath(REFERENCE_CASE.model) !== null;
}

/**
 * Runs the completion tool greedily and returns { command, llamaCommit, prompt, n_predict, text }.
 * `command` is recorded with the model as ${SVC_MODELS_DIR}/<file> and the tool by name,
 * so the stored file does not depend on this machine's paths.
 */
export function deriveReference({ prompt = REFERENCE_CASE.prompt, nPredict = REFERENCE_CASE.n_predict } = {}) {
  const bin = toolPath();
  if (!fs.existsSync(bin)) throw new Error(`reference tool not built: ${bin} (run node bench/build-reference.mjs)`);
  const model = realModelPath(REFERENCE_CASE.model);
  if (!model) throw new Error(`${REFERENCE_CASE.model} not found (set SVC_MODELS_DIR)`);
  const args = [
    '-m', model, '-p', prompt, '-n', String(nPredict),
    '--temp', '0', '--seed', '0', '-t', '1', '-c', '2048',
    '-no-cnv', '--no-display-prompt', '--no-warmup', '--simple-io',
  ];
  const r = spawnSync(bin, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
  if (r.status !== 0) throw new Error(`${bin} failed (status ${r.status}):\n${(r.stderr || '').split('\n').slice(-20).join('\n')}`);
  // The tool prints the generated text on stdout (logs go to stderr), then a blank line;
  // " [end of text]" if it hit EOS before n_predict.
  let text = r.stdout.replace(/\n\n$/, '').replace(/ \[end of text\]\n?$/, '');
  const q = (s) => (/[\s"'$]/.test(s) ? `'${s.replace(/'/g, `'\\''`)}'` : s);
  const command = [path.basename(bin), ...args.map((a) => (a === model ? `\${SVC_MODELS_DIR}/${REFERENCE_CASE.model}` : a))].map(q).join(' ');
  return { command, llamaCommit: llamaCommit(), prompt, n_predict: nPredict, text };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const argv = process.argv.slice(2);
  if (!referenceAvailable()) {
    console.error(`reference binary or model missing (${toolPath()}); run node bench/build-reference.mjs`);
    process.exit(2);
  }
  const ref = deriveReference();
  if (argv.includes('--print')) {
    console.log(JSON.stringify(ref, null, 2));
  } else if (argv.includes('--write')) {
    fs.mkdirSync(path.dirname(REFERENCE_FILE), { recursive: true });
    fs.writeFileSync(REFERENCE_FILE, JSON.stringify(ref, null, 2) + '\n');
    console.log(`wrote ${path.relative(process.cwd(), REFERENCE_FILE)}`);
    console.log(JSON.stringify(ref.text));
  } else {
    const stored = JSON.parse(fs.readFileSync(REFERENCE_FILE, 'utf8'));
    if (stored.text === ref.text) {
      console.log(`reference matches (${stored.llamaCommit.slice(0, 7)} stored, ${ref.llamaCommit.slice(0, 7)} now): ${JSON.stringify(ref.text)}`);
    } else {
      console.error(`MISMATCH\n stored:  ${JSON.stringify(stored.text)}\n derived: ${JSON.stringify(ref.text)}`);
      process.exit(1);
    }
  }
}
