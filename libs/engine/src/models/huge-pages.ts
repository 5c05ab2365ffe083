import { readFileSync } from 'node:fs';
import { usableMemory } from './residency';
import { NativeHugePages } from '../backend/native-addon';

/**
 * Whether a model's weights and KV cache go on 2 MiB pages (-huge-pages).
 *
 * Decoding a token reads every weight once, and on 4 KiB pages that walk misses the
 * TLB on most of them. Mapped from the GGUF file, the weights get whatever folios the
 * page cache holds: read cold through the mapping, 436 of the 0.5B benchmark model's
 * ~510 MiB came back in 2 MiB folios and mapped huge; after the file had been read
 * with read() (copied, pulled, hashed), none. So a mapped model's decode speed
 * depends on how its file was last read: for the 0.5B model on the 2-vCPU build
 * machine ~22 ms per token cold, 24–27 ms otherwise. Read into anonymous memory
 * advised onto huge pages it is ~22 ms whatever the page cache holds (six paired
 * server starts: 22.1 against 24.0 ms mapped, faster in all six; bench/RESULTS.md,
 * session 13). The cost: the weights are read at load instead of paged in on use, and
 * the kernel can no longer drop them under memory pressure and read them back from
 * the file, so `auto` keeps mapping models that take half the memory or more.
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
  return i.weightsOnCpu && i.fileBytes >= AUTO_MIN_BYTES && i.fileBytes < (i.totalBytes ?? usableMemory()) / 2;
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
