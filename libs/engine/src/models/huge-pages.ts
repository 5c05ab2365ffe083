import { readFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import { NativeHugePages } from '../backend/native-addon';

/**
 * Whether a model's weights and KV cache go on 2 MiB pages (-huge-pages).
 *
 * Decoding a token reads every weight once. Mapped from the GGUF file the weights sit
 * on 4 KiB pages (or on whatever large folios the page cache happens to hold: 40 % of
 * the 0.5B benchmark model on the build machine, a share that changes between
 * processes), and the walk misses the TLB on most of them. Read into anonymous memory
 * advised onto huge pages, the 0.5B model decoded at 22.1 ms per token against 24.0
 * (six paired server starts on the 2-vCPU build machine, faster in all six, and
 * steadier: 21.9–22.4 against 22.6–25.6 ms; bench/RESULTS.md, session 13). The cost:
 * the weights are read at load instead of paged in on use, and the kernel can no
 * longer drop them under memory pressure and read them back from the file, so `auto`
 * keeps mapping models that take half the memory or more.
 */
export type HugePagesMode = 'auto' | 'on' | 'off';

export interface HugePagesInput {
  mode: HugePagesMode;
  /** The weights compute on the CPU: the CPU backend, or no layer offloaded. */
  weightsOnCpu: boolean;
  fileBytes: number;
  /** /sys/kernel/mm/transparent_hugepage/enabled, null where there is none. */
  thpSetting?: string | null;
  totalBytes?: number;
}

export function useHugePages(i: HugePagesInput): boolean {
  if (i.mode === 'off' || !thpUsable(i.thpSetting === undefined ? thpSetting() : i.thpSetting)) return false;
  if (i.mode === 'on') return true;
  return i.weightsOnCpu && i.fileBytes >= AUTO_MIN_BYTES && i.fileBytes < (i.totalBytes ?? totalmem()) / 2;
}

/**
 * `auto` maps smaller models as before: their weights stay in the CPU's caches, and
 * stories260K (1 MiB) measured no faster on huge pages.
 */
const AUTO_MIN_BYTES = 32 << 20;

/** madvise(MADV_HUGEPAGE) takes effect under "always" and "madvise", not "never". */
export function thpUsable(setting: string | null): boolean {
  return setting !== null && /\[(always|madvise)\]/.test(setting);
}

function thpSetting(): string | null {
  if (process.platform !== 'linux') return null;
  try {
    return readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8');
  } catch {
    return null;
  }
}

/** The boot log's account of what went on huge pages. */
export function hugePagesLine(weights: NativeHugePages, kv: NativeHugePages): string {
  const mib = (b: number) => `${Math.round(b / (1 << 20))} MiB`;
  const failed = weights.error ?? kv.error ?? kv.collapseError;
  return `2 MiB pages: ${mib(weights.advisedBytes)} of weights; ${mib(kv.advisedBytes)} of KV cache and compute buffers ` +
    `(${mib(kv.collapsedBytes)} of it already in use, moved)` + (failed ? `; ${failed}` : '');
}
