import { Encoder } from '../../../../engine/src/embeddings/encoder-pool';
import { LoadedModel } from '../../../../engine/src/models/loaded-model';
import { canInfill } from '../../../../engine/src/prompt/prompt-renderer';
import { CatalogEntry } from '../../../../store/src/catalog';
import { ModelDefaults, parametersText } from '../../../../store/src/model-defaults';
import { templateRendersTools, templateThinks } from '../../../../store/src/template-traits';

/**
 * Model descriptions in the local-runner's shapes (tags, ps, show), read from
 * the catalog's GGUF metadata; a resident model adds what only loading tells
 * (content hash, parameter count, chat template as llama.cpp reads it).
 */

/** llama.cpp's LLAMA_FTYPE values (general.file_type) by name. */
const FILE_TYPES: Record<number, string> = {
  0: 'F32', 1: 'F16', 2: 'Q4_0', 3: 'Q4_1', 7: 'Q8_0', 8: 'Q5_0', 9: 'Q5_1', 10: 'Q2_K', 11: 'Q3_K_S', 12: 'Q3_K_M', 13: 'Q3_K_L',
  14: 'Q4_K_S', 15: 'Q4_K_M', 16: 'Q5_K_S', 17: 'Q5_K_M', 18: 'Q6_K', 19: 'IQ2_XXS', 20: 'IQ2_XS', 21: 'Q2_K_S', 22: 'IQ3_XS',
  23: 'IQ3_XXS', 24: 'IQ1_S', 25: 'IQ4_NL', 26: 'IQ3_S', 27: 'IQ3_M', 28: 'IQ2_S', 29: 'IQ2_M', 30: 'IQ4_XS', 31: 'IQ1_M', 32: 'BF16',
  36: 'TQ1_0', 37: 'TQ2_0', 38: 'MXFP4_MOE',
};

/** keep_alive "forever": the local-runner shows a far-future date rather than none. */
const NEVER = new Date('2318-01-01T00:00:00Z').toISOString();

export interface ModelDetails {
  parent_model: string;
  format: string;
  family: string;
  families: string[];
  parameter_size: string;
  quantization_level: string;
}

/** What the listings read of loaded weights: a generating model's or an encoder's. */
type ResidentWeights = Pick<LoadedModel, 'native' | 'contentHash'>;

export function details(e: CatalogEntry, lm?: ResidentWeights): ModelDetails {
  const kv = e.meta?.kv ?? {};
  const arch = String(kv['general.architecture'] ?? lm?.native.info.architecture ?? '');
  const ft = kv['general.file_type'];
  return {
    parent_model: '',
    format: 'gguf',
    family: arch,
    families: arch ? [arch] : [],
    parameter_size: typeof kv['general.size_label'] === 'string' ? (kv['general.size_label'] as string) : paramSize(lm?.native.info.nParams || fileParams(e) || 0),
    quantization_level: typeof ft === 'number' ? (FILE_TYPES[ft] ?? String(ft)) : '',
  };
}

/**
 * The model's parameters as its file's tensor table counts them: only for a whole model (an
 * adapter's or projector's file is not the model's size, and a split file's first part is a part).
 */
function fileParams(e: CatalogEntry): number | undefined {
  const split = e.meta?.kv['split.count'];
  if (e.capabilities.length === 0 || (typeof split === 'number' && split > 1)) return undefined;
  return e.meta?.paramCount;
}

/**
 * A store model's digest is its weights layer's; a loose file's is its sha256,
 * which the engine computes when it loads it. An unloaded loose file is not
 * hashed here (gigabytes per listing): its digest stays empty until loaded.
 */
function digest(e: CatalogEntry, lm?: ResidentWeights): string {
  return e.digest ?? (lm ? `sha256:${lm.contentHash}` : '');
}

export function tagsEntry(e: CatalogEntry, lm?: LoadedModel): Record<string, unknown> {
  return { name: e.name, model: e.name, modified_at: e.modifiedAt.toISOString(), size: e.sizeBytes, digest: digest(e, lm), details: details(e, lm) };
}

/** A loaded encoder, listed by /api/ps beside the generating models. */
export function encoderPsEntry(enc: Encoder, onGpu: boolean): Record<string, unknown> {
  const e = enc.entry;
  return {
    name: e.name,
    model: e.name,
    size: e.sizeBytes,
    digest: digest(e, enc),
    details: details(e, enc),
    expires_at: enc.expiresAt?.toISOString() ?? NEVER,
    size_vram: onGpu ? e.sizeBytes : 0,
    context_length: enc.embedder.nCtx,
  };
}

/** `name`: what the load goes by now (ModelManager.listedName). */
export function psEntry(lm: LoadedModel, name: string, onGpu: boolean): Record<string, unknown> {
  const e = lm.entry;
  return {
    name,
    model: name,
    size: lm.estimatedBytes || e.sizeBytes,
    digest: digest(e, lm),
    details: details(e, lm),
    expires_at: lm.expiresAt?.toISOString() ?? NEVER,
    size_vram: onGpu ? lm.estimatedBytes || e.sizeBytes : 0,
    context_length: lm.scheduler.nCtxSeq,
  };
}

export interface ShowExtras {
  /** The name's params, system and license layers. */
  defaults: ModelDefaults;
  /** verbose: the file's key/values with every array read whole. */
  fullKv?: Record<string, unknown>;
}

export function showAnswer(e: CatalogEntry, lm: LoadedModel | undefined, x: ShowExtras): Record<string, unknown> {
  const kv = e.meta?.kv ?? {};
  const templateKv = typeof kv['tokenizer.chat_template'] === 'string' ? (kv['tokenizer.chat_template'] as string) : '';
  const d = x.defaults;
  const license = d.license ?? (typeof kv['general.license'] === 'string' ? kv['general.license'] : '');
  return {
    license,
    modelfile: modelfile(e, d),
    parameters: parametersText(d.options),
    // An unloaded model is described from the store without loading it: its template is empty until loaded (spec).
    template: lm?.native.info.chatTemplate ?? '',
    system: d.system ?? '',
    details: details(e, lm),
    model_info: { ...modelInfo(x.fullKv ?? kv, x.fullKv !== undefined), ...(fileParams(e) ? { 'general.parameter_count': fileParams(e) } : {}) },
    capabilities: capabilities(e, lm?.native.info.chatTemplate ?? templateKv, lm ? canInfill(lm.native) : fimInMetadata(kv), lm ? thinksWhenLoaded(lm) : undefined),
    modified_at: e.modifiedAt.toISOString(),
  };
}

/** What `ollama create` would need to make the same model again (svc adds no TEMPLATE: the file's own is used). */
function modelfile(e: CatalogEntry, d: ModelDefaults): string {
  const lines = ['# Modelfile generated by svc', `FROM ${e.path}`];
  // Triple quotes, as the Modelfile parser reads a multi-line value (an escaped newline stays two characters).
  if (d.system) lines.push(`SYSTEM """${d.system}"""`);
  for (const l of parametersText(d.options).split('\n')) if (l) lines.push(`PARAMETER ${l}`);
  return `${lines.join('\n')}\n`;
}

/** Whether llama.cpp's chat code finds a reasoning block in the loaded model's template (what splits its thoughts). */
function thinksWhenLoaded(lm: LoadedModel): boolean {
  if (!lm.native.info.chatTemplate) return false;
  try {
    return lm.native.applyChatTemplate({ messages: [{ role: 'user', content: 'x' }], addGenerationPrompt: true }).supportsThinking;
  } catch {
    return false;
  }
}

function capabilities(e: CatalogEntry, template: string, infill: boolean, thinks: boolean | undefined): string[] {
  const caps: string[] = [];
  if (e.capabilities.includes('chat') || e.capabilities.includes('completion')) caps.push('completion');
  // A suffix can be filled in (the local runner's name for it).
  if (infill && caps.includes('completion')) caps.push('insert');
  // As the local-runner decides it: a template that mentions tools can render them.
  if (templateRendersTools(template)) caps.push('tools');
  // Thoughts come back apart (`think`): as llama.cpp's chat code decides it once loaded; from the
  // template's text before that (a think tag, a thought channel, a reasoning switch).
  if (thinks ?? templateThinks(template)) caps.push('thinking');
  if (e.capabilities.includes('embeddings')) caps.push('embedding');
  // A projector beside the weights (-mmproj, or the manifest's projector layer): images are read.
  if (e.projector && caps.includes('completion')) caps.push('vision');
  return caps;
}

/**
 * GGUF key/values as the local runner shows them: without verbose every non-empty array
 * (vocabularies, merges) is null; general.name and the chat template are left out.
 */
function modelInfo(kv: Record<string, unknown>, verbose: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(kv)) {
    if (k === 'tokenizer.chat_template' || k === 'general.name') continue;
    const isArray = Array.isArray(v) || (v !== null && typeof v === 'object');
    out[k] = !isArray || (verbose && Array.isArray(v)) || (Array.isArray(v) && v.length === 0) ? v : null;
  }
  return out;
}

function paramSize(n: number): string {
  if (!n) return '';
  const units: Array<[number, string]> = [[1e12, 'T'], [1e9, 'B'], [1e6, 'M'], [1e3, 'K']];
  for (const [d, u] of units) if (n >= d) return `${(n / d).toFixed(n / d >= 100 ? 0 : 1).replace(/\.0$/, '')}${u}`;
  return String(n);
}

/**
 * An unloaded model's fill-in-the-middle tokens, as far as its metadata names them: llama.cpp
 * also finds them by their text at load, so a model may show `insert` only once loaded.
 */
function fimInMetadata(kv: Record<string, unknown>): boolean {
  return ['pre', 'suf', 'mid'].every((k) => typeof kv[`tokenizer.ggml.fim_${k}_token_id`] === 'number');
}
