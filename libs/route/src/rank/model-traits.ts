import { CatalogEntry } from '../../../store/src/catalog';
import { MEDIA_PROJECTOR } from '../../../store/src/manifest-store';
import { templateRendersTools, templateThinks } from '../../../store/src/template-traits';

/** What the ranking knows of an installed chat model without loading it: its file's metadata and its store manifest. */
export interface ModelTraits {
  name: string;
  /** Parameters: the file's tensor table, else estimated from the file's size and weight type. */
  params: number;
  /** Positions one request gets on it (ModelManager.positionsFor). */
  context: number;
  /** A vision projector beside it in its store manifest. */
  vision: boolean;
  /** Its chat template renders tools. */
  tools: boolean;
  /** Its chat template has a think block. */
  thinks: boolean;
  /** Tokens in its vocabulary (0: unknown). */
  vocab: number;
  /** Its names (listed, general.name, general.basename, general.finetune), lower-case: where name hints are read. */
  names: string;
}

/** Models POST /v1/route ranks: those that generate and have a chat template (capability `chat`). */
export function isChatEntry(e: CatalogEntry): boolean {
  return e.capabilities.includes('chat');
}

export function traitsOf(e: CatalogEntry, context: number): ModelTraits {
  const kv = e.meta?.kv ?? {};
  const template = typeof kv['tokenizer.chat_template'] === 'string' ? (kv['tokenizer.chat_template'] as string) : '';
  const tokens = kv['tokenizer.ggml.tokens'];
  // Long arrays are read as their length only (gguf-metadata.ts); a short one whole.
  const vocab = Array.isArray(tokens) ? tokens.length : tokens && typeof tokens === 'object' ? Number((tokens as { length?: number }).length) || 0 : 0;
  const names = [e.name, kv['general.name'], kv['general.basename'], kv['general.finetune']].filter((n) => typeof n === 'string').join(' ').toLowerCase();
  return {
    name: e.name,
    params: e.meta?.paramCount || paramsFromSize(e.sizeBytes, kv['general.file_type']),
    context,
    // -mmproj for -m, or a projector layer in its manifest.
    vision: e.projector !== undefined || (e.manifest?.layers.some((l) => l.mediaType === MEDIA_PROJECTOR) ?? false),
    tools: templateRendersTools(template),
    thinks: templateThinks(template),
    vocab,
    names,
  };
}

/**
 * Bytes per parameter by llama.cpp's file type (general.file_type): F32, F16, Q8_0, BF16; the
 * 2- to 6-bit quantisations are taken as about 0.6 (Q4_K_M's 4.8 bits per weight).
 */
const BYTES_PER_PARAM: Record<number, number> = { 0: 4, 1: 2, 7: 1.0625, 32: 2 };

function paramsFromSize(bytes: number, fileType: unknown): number {
  return Math.round(bytes / (typeof fileType === 'number' ? (BYTES_PER_PARAM[fileType] ?? 0.6) : 0.6));
}
