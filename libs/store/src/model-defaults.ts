import type { Manifest } from './manifest-store';

/**
 * What a manifest says beyond its weights, as the local runner's `ollama create` writes it:
 * PARAMETER lines (a JSON params layer), SYSTEM and LICENSE. Two names may share one weights
 * file and differ only here (a custom model made FROM another), so this is read per name.
 */
export const MEDIA_PARAMS = 'application/vnd.ollama.image.params';
export const MEDIA_SYSTEM = 'application/vnd.ollama.image.system';
export const MEDIA_LICENSE = 'application/vnd.ollama.image.license';

/** Bigger layers are not metadata a model author wrote; they are skipped rather than read whole. */
const MAX_TEXT_LAYER = 1 << 20;

export interface ModelDefaults {
  /** The params layer: option name → value (numbers, booleans, strings, `stop` as a list). */
  options: Record<string, unknown>;
  system?: string;
  license?: string;
}

export const NO_DEFAULTS: Readonly<ModelDefaults> = Object.freeze({ options: Object.freeze({}) });

/** Reads a layer's text by digest; undefined when it is missing or unreadable. */
export type LayerReader = (digest: string) => string | undefined;

/** Layers are content-addressed: what a set of digests says never changes. */
const cache = new Map<string, ModelDefaults>();
const CACHE_LIMIT = 256;

export function defaultsOf(manifest: Manifest | undefined, read: LayerReader): ModelDefaults {
  if (!manifest) return NO_DEFAULTS;
  const text = (media: string) => {
    const l = manifest.layers.find((x) => x.mediaType === media);
    return l && l.size <= MAX_TEXT_LAYER ? l : undefined;
  };
  const [params, system, license] = [text(MEDIA_PARAMS), text(MEDIA_SYSTEM), text(MEDIA_LICENSE)];
  if (!params && !system && !license) return NO_DEFAULTS;
  const key = [params?.digest, system?.digest, license?.digest].join('|');
  const hit = cache.get(key);
  if (hit) return hit;
  const d: ModelDefaults = { options: parseParams(params && read(params.digest)) };
  const sys = system && read(system.digest);
  if (sys) d.system = sys;
  const lic = license && read(license.digest);
  if (lic) d.license = lic;
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value!);
  cache.set(key, d);
  return d;
}

/** A params layer that is not a JSON object (damaged, or a format not known here) gives no options. */
function parseParams(text: string | undefined): Record<string, unknown> {
  if (!text) return {};
  try {
    const v = JSON.parse(text) as unknown;
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/**
 * The params as /api/show's `parameters` writes them: one `name value` line per value, the name
 * padded to 30 columns, strings quoted, a list (stop) one line per item.
 */
export function parametersText(options: Record<string, unknown>): string {
  const lines: string[] = [];
  for (const [k, v] of Object.entries(options).sort(([a], [b]) => a.localeCompare(b))) {
    for (const item of Array.isArray(v) ? v : [v]) lines.push(`${k.padEnd(30)} ${typeof item === 'string' ? JSON.stringify(item) : String(item)}`);
  }
  return lines.join('\n');
}
