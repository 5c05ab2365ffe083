import { totalmem } from 'node:os';
import { statSync } from 'node:fs';
import { CatalogEntry } from '../../../store/src/catalog';
import { InvalidRequestError } from '../core/errors';

/** Ollama's default keep_alive. */
export const DEFAULT_KEEP_ALIVE_MS = 5 * 60_000;
const UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Past about a century a keep_alive is "forever" (a Date cannot hold 9e15 s, and /api/ps showed it). */
const FOREVER_FROM_MS = 100 * 365 * 24 * 3600 * 1000;

/**
 * keep_alive as Ollama reads it: a number is seconds, a string is a Go
 * duration ("5m", "1h30m", "500ms") or a number of seconds; 0 unloads after
 * the request; any negative value keeps the model forever (Infinity).
 */
export function parseKeepAlive(v: number | string | undefined | null): number {
  const ms = keepAliveMs(v);
  return ms >= FOREVER_FROM_MS ? Infinity : ms;
}

function keepAliveMs(v: number | string | undefined | null): number {
  if (v === undefined || v === null || v === '') return DEFAULT_KEEP_ALIVE_MS;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new InvalidRequestError(`keep_alive must be a number or a duration, got ${v}`);
    return v < 0 ? Infinity : v * 1000;
  }
  const s = String(v).trim();
  if (/^[-+]?\d+(\.\d+)?$/.test(s)) return keepAliveMs(Number(s));
  // One sign, as Go's durations take it, right before the duration: a negative one is forever.
  const sign = /^[-+]/.test(s) ? s[0] : '';
  const ms = durationMs(s.slice(sign.length), s);
  return sign === '-' && ms > 0 ? Infinity : ms;
}

/** An unsigned Go duration ("1h30m", "500ms"); `whole` names the value in the error. */
function durationMs(body: string, whole: string): number {
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let ms = 0;
  let pos = 0;
  for (let m = re.exec(body); m; m = re.exec(body)) {
    ms += Number(m[1]) * UNITS[m[2]];
    pos = re.lastIndex;
  }
  if (pos !== body.length || pos === 0) throw new InvalidRequestError(`keep_alive: cannot read "${whole}" as a duration (e.g. 5m, 30s, 1h)`);
  return ms;
}

/** -memory-budget: bytes, or a size like "8GiB", "512MB"; default total memory minus 2 GiB. */
export function parseBytes(v: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$/i.exec(v);
  if (!m) throw new Error(`cannot read "${v}" as a size (e.g. 8GiB, 512MB, 1073741824)`);
  const unit = (m[2] ?? '').toLowerCase();
  const pow = ' kmgt'.indexOf(unit[0] ?? ' ');
  const base = unit.includes('i') ? 1024 : 1000;
  return Math.round(Number(m[1]) * base ** Math.max(0, pow));
}

export function defaultMemoryBudget(usable = usableMemory()): number {
  return Math.max(512 << 20, usable - 2 * 1024 ** 3);
}

/**
 * The memory this process may use: the machine's, or its cgroup's limit where lower (a container
 * or pod limit). Sized from the node's memory, a pod limited to 8 GiB on a big node never unloaded
 * a model and was OOM-killed instead.
 */
export function usableMemory(total = totalmem(), limit: number | undefined = process.constrainedMemory?.()): number {
  return limit && limit > 0 && limit < total ? limit : total;
}

/** Positions per request for a model, from its metadata: the same rule the loader applies. */
export function seqPositions(entry: CatalogEntry, ctxSize: number, cap: number): number {
  const arch = String(entry.meta?.kv['general.architecture'] ?? '');
  const train = Number(entry.meta?.kv[`${arch}.context_length`] ?? 0) || cap;
  return Math.min(train, ctxSize > 0 ? ctxSize : cap);
}

/**
 * Memory a model will take, without loading it: the weights file plus an f16
 * K and V cache for the context: n_layer * n_ctx * (n_head_kv * head_dim) * 2 * 2.
 */
export function estimateBytes(entry: CatalogEntry, nCtx: number): number {
  const kv = entry.meta?.kv ?? {};
  const arch = String(kv['general.architecture'] ?? '');
  const num = (k: string): number => {
    const x = kv[`${arch}.${k}`];
    return typeof x === 'number' ? x : Array.isArray(x) && typeof x[0] === 'number' ? Math.max(...(x as number[])) : 0;
  };
  const nLayer = num('block_count');
  const nHead = num('attention.head_count');
  const nHeadKv = num('attention.head_count_kv') || nHead;
  const headDim = num('attention.key_length') || (nHead ? num('embedding_length') / nHead : 0);
  return entry.sizeBytes + projectorBytes(entry) + nLayer * nCtx * nHeadKv * headDim * 2 * 2;
}

/** The vision projector's file, loaded beside the weights: counted against -memory-budget too. */
function projectorBytes(entry: CatalogEntry): number {
  if (!entry.projector) return 0;
  try {
    return statSync(entry.projector).size;
  } catch {
    return 0;
  }
}
