import { NativeContext } from '../backend/native-addon';

/**
 * Retained prompts: finished sequences kept so a later request starting with the
 * same tokens skips their prefill. Two tiers:
 * - resident: the entry's sequence still holds its cells in the unified KV cache,
 *   and a match shares them (seq_cp copies no bytes);
 * - host: llama.cpp's per-sequence state, read out to memory; a match writes it
 *   into the request's sequence (a memcpy, not a prefill).
 * Resident cells cost a step when they lie inside its attention window: from the
 * first to the last cell its sequences hold (llama.cpp patch 0006; without it, and
 * for architectures it leaves out, every cell up to the highest used one). A step
 * of several requests spans all their cells and whatever lies between, a request
 * sharing an entry's prefix spans from that entry's cells to its own. On a CPU
 * that is real compute, so while anything decodes an entry keeps resident only
 * the prefix running requests share with it, the rest moving to the host tier (demoteIdle), and
 * while nothing runs entries move there too (demoteOneIdle); an entry shorter
 * than MIN_PROMOTE_TOKENS is dropped instead, as no match would write it back.
 * With the KV cache on a device it is the reverse (see PrefixCacheLimits.kvOnDevice): entries stay
 * resident until cells run short (relieve). Bounded by entry count, resident
 * positions and host bytes; evicted least-recently-used.
 */
export interface PrefixEntry {
  /** Sequence id while some of its cells are resident. */
  seq: number | undefined;
  /** Leading positions whose cells the sequence holds (0 when host-only). */
  residentLen: number;
  /** The whole entry's state, once read out (kept while resident, so a second demotion is free). */
  state?: Buffer;
  tokens: Int32Array;
  /** Leading tokens that were the request's prompt (the rest it generated). */
  promptLen: number;
  /** Who may reuse it (the owner key: caller and marking): a match tells how much of a prompt it saw. */
  partition: string;
  lastUsed: number;
}

export interface PrefixCacheLimits {
  maxEntries: number;
  /** Positions resident entries may hold together. */
  maxResidentPositions: number;
  /** Bytes host-tier states may take together (0: no host tier; demoted entries are dropped). */
  maxHostBytes: number;
  /**
   * The KV cache lives in device memory. Reading a state out there is a device
   * copy per run of cells per layer (about 2 ms on an H200 even for 8 tokens,
   * stalling every stream meanwhile), and attending over masked cells costs the GPU
   * less (measured: the aggregate and short-prompt TTFT both improved when entries
   * stayed; with attention windows a lone request no longer attends them at all):
   * so entries leave the KV cache only when cells run short,
   * and then only their prompt part goes to the host tier (generated tokens of
   * concurrent requests interleave cell by cell: a copy per cell).
   */
  kvOnDevice?: boolean;
}

export interface PrefixReuse {
  /** Prompt positions the request's sequence now holds. */
  n: number;
  /** The entry whose cells it shares (resident match), if any. */
  shared?: PrefixEntry;
}

/** Shorter matches are prefilled again: cheaper than writing a state back. */
const MIN_PROMOTE_TOKENS = 32;
/**
 * With the KV cache on a device, shorter matches are not shared either: a few more
 * prompt tokens in a batch cost a GPU nothing, and sharing 2 or 3 tokens (a BOS and
 * a first word) made short prefills slower and uneven (qwen2-0.5b, H200: 2.5–5.6 ms
 * of engine time per 8-token prompt, median 5.1, against 4.0–4.5, median 4.3, without).
 * With attention windows it also matters where the shared cells are: a request
 * sharing an old entry's first cells attends everything between those and its own.
 */
const MIN_DEVICE_SHARE_TOKENS = 32;

export class PrefixCache {
  private readonly entries: PrefixEntry[] = [];
  private clock = 0;
  promotions = 0;
  demotions = 0;

  constructor(
    private readonly ctx: NativeContext,
    private readonly limits: PrefixCacheLimits,
    /** Gives a sequence id back to the scheduler (its KV removed). */
    private readonly freeSeq: (seq: number) => void,
  ) {}

  get size(): number {
    return this.entries.length;
  }

  get residentCount(): number {
    return this.entries.reduce((n, e) => n + (e.seq !== undefined ? 1 : 0), 0);
  }

  get hostBytes(): number {
    return this.entries.reduce((n, e) => n + (e.state?.length ?? 0), 0);
  }

  /** Whether demoteUnshared has anything to do: a resident entry, and a KV cache in host memory. */
  get demotesWhileRunning(): boolean {
    return !this.limits.kvOnDevice && this.residentCount > 0;
  }

  private get residentPositions(): number {
    return this.entries.reduce((n, e) => n + e.residentLen, 0);
  }

  /** The entry of `partition` sharing the longest common prefix with `tokens`, if any. */
  match(tokens: Int32Array, partition = ''): { entry: PrefixEntry; length: number } | undefined {
    let best: { entry: PrefixEntry; length: number } | undefined;
    for (const e of this.entries) {
      if (e.partition !== partition) continue;
      const n = commonPrefix(e.tokens, tokens);
      if (n > 0 && (!best || n > best.length)) best = { entry: e, length: n };
    }
    if (best) best.entry.lastUsed = ++this.clock;
    return best;
  }

  /** Puts the longest retained prefix of `prompt` into the empty sequence `seq`. */
  async reuse(prompt: Int32Array, seq: number, partition = ''): Promise<PrefixReuse> {
    const hit = this.match(prompt, partition);
    // The last prompt token is always decoded again: its logits start the output.
    const n = hit ? Math.min(hit.length, prompt.length - 1) : 0;
    if (!hit || n <= 0 || this.tooShortToShare(n)) return { n: 0 };
    const e = hit.entry;
    if (e.seq !== undefined && n <= e.residentLen) {
      this.ctx.seqCopy(e.seq, seq, 0, n);
      return { n, shared: e };
    }
    // Writing a whole state back pays for all of it: only for a match worth it.
    if (e.state && n >= MIN_PROMOTE_TOKENS && n * 8 >= e.tokens.length) {
      if ((await this.ctx.stateSeqSet(seq, e.state)) > 0) {
        this.ctx.seqRemove(seq, n, -1);
        this.promotions++;
        return { n };
      }
      this.ctx.seqRemove(seq, -1, -1); // no room for all of it: fall back to the resident part
    }
    if (e.seq !== undefined && e.residentLen > 0) {
      const m = Math.min(n, e.residentLen);
      this.ctx.seqCopy(e.seq, seq, 0, m);
      return { n: m, shared: e };
    }
    return { n: 0 };
  }

  /**
   * Keeps `seq` holding `tokens`. Returns the sequence ids the caller must free:
   * entries made redundant (a prefix of the new one) and overflow.
   */
  retain(seq: number, tokens: Int32Array, promptLen = tokens.length, partition = ''): number[] {
    // No match this short is ever shared: it would only take a slot.
    if (this.tooShortToShare(tokens.length)) return [seq];
    const freed: number[] = [];
    for (let i = this.entries.length - 1; i >= 0; i--) {
      const e = this.entries[i];
      if (e.partition === partition && e.tokens.length <= tokens.length && commonPrefix(e.tokens, tokens) === e.tokens.length) {
        if (e.seq !== undefined) freed.push(e.seq);
        this.entries.splice(i, 1);
      }
    }
    this.entries.push({ seq, residentLen: tokens.length, tokens, promptLen: Math.min(promptLen, tokens.length), partition, lastUsed: ++this.clock });
    while (this.entries.length > this.limits.maxEntries || this.residentPositions > this.limits.maxResidentPositions) {
      const victim = this.lru(() => true);
      if (!victim) break;
      if (victim.seq !== undefined) freed.push(victim.seq);
      this.remove(victim);
    }
    return freed;
  }

  /**
   * Called while requests decode: every resident entry keeps only the prefix they
   * share with it (`shared`: entry → longest shared length); the rest of its cells
   * are freed, its whole state kept in memory (if it could ever be written back).
   */
  async demoteIdle(shared: Map<PrefixEntry, number>): Promise<void> {
    if (this.limits.kvOnDevice) return;
    for (const e of [...this.entries]) {
      if (e.seq === undefined) continue;
      const keep = shared.get(e) ?? 0;
      if (e.residentLen > keep) await this.demote(e, keep);
    }
  }

  /**
   * Called while nothing runs, one entry per call so a request arriving meanwhile
   * waits for one state read at most: moves the least recently used resident entry
   * to host memory. Only with a host tier (without one this would drop entries a
   * later request could reuse) and with the KV cache in host memory (kvOnDevice).
   * False when there is nothing to do.
   */
  async demoteOneIdle(): Promise<boolean> {
    if (this.limits.maxHostBytes <= 0 || this.limits.kvOnDevice) return false;
    const e = this.lru((x) => x.seq !== undefined);
    if (!e) return false;
    await this.demote(e, 0);
    return true;
  }

  /** demoteIdle with what the running requests share: each entry's longest shared length. */
  async demoteUnshared(running: Iterable<{ sharedPrefix?: { entry: PrefixEntry; length: number } }>): Promise<void> {
    const shared = new Map<PrefixEntry, number>();
    for (const s of running) {
      const p = s.sharedPrefix;
      if (p && p.length > (shared.get(p.entry) ?? 0)) shared.set(p.entry, p.length);
    }
    await this.demoteIdle(shared);
  }

  /** KV cache full: frees the least recently used resident entry's cells. False when none is left. */
  async relieve(): Promise<boolean> {
    const e = this.lru((x) => x.seq !== undefined);
    if (!e) return false;
    await this.demote(e, 0);
    return true;
  }

  /** A sequence id taken from the least recently used resident entry (its state stays if it was read). */
  stealSeq(): number | undefined {
    const e = this.lru((x) => x.seq !== undefined);
    if (!e) return undefined;
    const seq = e.seq as number;
    this.ctx.seqRemove(seq, -1, -1);
    e.seq = undefined;
    e.residentLen = 0;
    if (!e.state) this.remove(e);
    return seq;
  }

  /** Drops every entry; returns the resident ones' sequence ids. */
  clear(): number[] {
    const seqs = this.entries.flatMap((e) => (e.seq !== undefined ? [e.seq] : []));
    this.entries.length = 0;
    return seqs;
  }

  private async demote(e: PrefixEntry, keep: number): Promise<void> {
    const seq = e.seq as number;
    // On a device only the prompt part would go to host memory. A state shorter than
    // MIN_PROMOTE_TOKENS is never written back (reuse prefills such a match again):
    // reading it out would only cost an engine job and hold a slot.
    const kept = this.limits.kvOnDevice ? e.promptLen : e.tokens.length;
    if (!e.state && this.limits.maxHostBytes > 0 && e.residentLen === e.tokens.length && kept >= MIN_PROMOTE_TOKENS) {
      if (this.limits.kvOnDevice && e.promptLen < e.tokens.length) {
        this.ctx.seqRemove(seq, e.promptLen, -1);
        e.tokens = e.tokens.slice(0, e.promptLen);
        e.residentLen = e.promptLen;
        keep = Math.min(keep, e.promptLen);
      }
      const state = await this.ctx.stateSeqGet(seq);
      if (state.length <= this.limits.maxHostBytes) e.state = state;
    }
    this.demotions++;
    if (keep > 0) {
      this.ctx.seqRemove(seq, keep, -1);
      e.residentLen = keep;
    } else {
      this.freeSeq(seq);
      e.seq = undefined;
      e.residentLen = 0;
      if (!e.state) this.remove(e);
    }
    while (this.hostBytes > this.limits.maxHostBytes) {
      const victim = this.lru((x) => x.state !== undefined);
      if (!victim) break;
      victim.state = undefined;
      if (victim.seq === undefined) this.remove(victim);
    }
  }

  /** With the KV cache on a device, matches shorter than MIN_DEVICE_SHARE_TOKENS are prefilled again. */
  private tooShortToShare(n: number): boolean {
    return this.limits.kvOnDevice === true && n < MIN_DEVICE_SHARE_TOKENS;
  }

  private lru(pred: (e: PrefixEntry) => boolean): PrefixEntry | undefined {
    let best: PrefixEntry | undefined;
    for (const e of this.entries) if (pred(e) && (!best || e.lastUsed < best.lastUsed)) best = e;
    return best;
  }

  private remove(e: PrefixEntry): void {
    const i = this.entries.indexOf(e);
    if (i >= 0) this.entries.splice(i, 1);
  }
}

export function commonPrefix(a: Int32Array, b: Int32Array): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
