import { mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { NativeContext } from '../backend/native-addon';
import { Scheduler } from '../scheduler/scheduler';
import { writeFileAtomic } from '../../../store/src/atomic-file';
import { ContextCapacityError } from './context-errors';
import { KvContext } from './kv-context';

/**
 * Which contexts hold a sequence of the KV cache, and how one gets it: spilled
 * contexts come back from disk, lazy forks are bound to a sequence on first use.
 *
 * A fork records only its source (KvContext.lazySource): no sequence id, no KV
 * operation, so it costs the same at any length. Binding it later is a seq_cp
 * from the source over its tokens (metadata only, no KV bytes). The rule that
 * keeps this sound: before a source's cells from position p on change, every
 * lazy context reaching past p gets its own sequence (detach); a deleted
 * source hands its sequence to its longest dependent (handOver). Spilling a
 * source changes no cell: its dependents follow it to disk and bring it back
 * when they are bound.
 *
 * Every method runs inside the scheduler's exclusive().
 */
export class Residency {
  constructor(
    private readonly ctx: NativeContext,
    private readonly scheduler: Scheduler,
    private readonly spillDir: string,
    private readonly maxResident: number,
    /** The live contexts (a deleted one is already gone from it). */
    private readonly contexts: () => Iterable<KvContext>,
  ) {}

  /** Gives the context a sequence: reads its spilled state, or binds a lazy fork to its source's cells. */
  async makeResident(c: KvContext): Promise<void> {
    if (c.seq !== undefined) return;
    if (c.lazySource) return this.bindLazy(c);
    const seq = await this.allocSeq(c);
    if (c.spillPath) {
      const read = await this.setState(seq, readFileSync(c.spillPath), c);
      if (read <= 0) {
        this.scheduler.freeSeqId(seq);
        if (read < 0) throw new ContextCapacityError();
        throw new Error(`could not restore spilled context ${c.id}: its file on disk is damaged`);
      }
      // An inherited file holds its source's cells past this context's tokens.
      if (c.spillCells !== undefined) this.ctx.seqRemove(seq, c.spillCells, -1);
      rmSync(c.spillPath, { force: true });
      c.spillPath = undefined;
      c.spillCells = undefined;
    }
    c.seq = seq;
    c.sharedWithParent = 0; // restored cells are its own
  }

  /** The state in `file` cut to `cells` positions, read through a sequence taken for a moment (past the slot budget if need be). */
  async readCut(c: KvContext, file: string, cells: number): Promise<Buffer> {
    const seq = await this.allocSeq(c, true);
    try {
      const read = await this.setState(seq, readFileSync(file), c);
      if (read < 0) throw new ContextCapacityError();
      if (read === 0) throw new Error(`could not read spilled context ${c.id}: its file on disk is damaged`);
      this.ctx.seqRemove(seq, cells, -1);
      return await this.ctx.stateSeqGet(seq);
    } finally {
      this.scheduler.freeSeqId(seq);
    }
  }

  /** Before c's cells from position `from` on change: lazy contexts reading past it get their own sequence. */
  async detach(c: KvContext, from: number): Promise<void> {
    for (;;) {
      // Re-read after each await: the set is small and this stays correct if it changed.
      const d = this.dependents(c).find((x) => x.tokens.length > from);
      if (!d) return;
      await this.bindLazy(d);
    }
  }

  /**
   * c is being deleted (already gone from the live set): its longest lazy
   * dependent takes its sequence, cut to its own length, and becomes the source
   * of the others (their tokens are prefixes of its). Otherwise c's sequence
   * and spill file are freed.
   */
  async handOver(c: KvContext): Promise<void> {
    if (c.seq === undefined && c.spillPath && this.dependents(c).length > 0) return this.handOverFile(c);
    if (this.dependents(c).length > 0) await this.makeResident(c); // throws with c unchanged
    const deps = this.dependents(c);
    let heir: KvContext | undefined;
    if (deps.length > 0 && c.seq !== undefined) {
      heir = deps.reduce((a, b) => (b.tokens.length > a.tokens.length ? b : a));
      heir.seq = c.seq;
      heir.lazySource = undefined;
      this.ctx.seqRemove(heir.seq, heir.tokens.length, -1);
      for (const d of deps) if (d !== heir) d.lazySource = heir;
    } else if (c.seq !== undefined) {
      this.scheduler.freeSeqId(c.seq);
    }
    c.seq = undefined;
    if (c.spillPath) rmSync(c.spillPath, { force: true });
    c.spillPath = undefined;
    // c left the live set before this ran, so others may have filled the budget meanwhile.
    if (heir && this.residentCount() > this.maxResident) await this.spillIdle(heir);
  }

  /**
   * A spilled source's file goes to its longest dependent, to be cut to that one's length when it
   * comes back (spillCells); the others read from it. Bringing the source back first needed a free
   * sequence, and a delete while every resident context was busy was a 429.
   */
  private handOverFile(c: KvContext): void {
    const deps = this.dependents(c);
    const heir = deps.reduce((a, b) => (b.tokens.length > a.tokens.length ? b : a));
    const path = join(this.spillDir, `${heir.id}.kv`);
    renameSync(c.spillPath as string, path);
    heir.spillPath = path;
    heir.spillCells = Math.min(heir.tokens.length, c.spillCells ?? Infinity);
    heir.lazySource = undefined;
    heir.sharedWithParent = 0;
    for (const d of deps) if (d !== heir) d.lazySource = heir;
    c.spillPath = undefined;
    c.spillCells = undefined;
  }

  /**
   * A free sequence id, spilling the least recently used idle context if needed. `overBudget`:
   * the -context-slots budget may be passed by one for a moment when nothing else can go (a
   * lazy bind needs its source and itself resident at once; with one slot it never could).
   */
  async allocSeq(keep?: KvContext, overBudget = false): Promise<number> {
    if (this.scheduler.availableSeqs === 0 || this.residentCount() >= this.maxResident) {
      const spilled = await this.spillIdle(keep);
      if (!spilled && (!overBudget || this.scheduler.availableSeqs === 0)) throw new ContextCapacityError();
    }
    const seq = this.scheduler.allocSeq();
    if (seq === undefined) throw new ContextCapacityError();
    return seq;
  }

  /**
   * Writes a state into seq, spilling idle contexts while the KV cache has no
   * room for it: the bytes llama.cpp read, 0 when it refused the state (nothing
   * spilled for that), -1 when no idle context was left to make room.
   */
  async setState(seq: number, state: Buffer, keep: KvContext): Promise<number> {
    for (;;) {
      const read = await this.ctx.stateSeqSet(seq, state);
      if (read >= 0) return read;
      if (!(await this.spillIdle(keep))) return -1;
    }
  }

  /** Spills the least recently used idle resident context; false when there is none. Also runs inside a decode step (KV pressure). */
  async spillIdle(keep?: KvContext): Promise<boolean> {
    let victim: KvContext | undefined;
    for (const x of this.contexts()) {
      if (x.seq === undefined || x.busy || x === keep) continue;
      if (!victim || x.lastUsed < victim.lastUsed) victim = x;
    }
    if (!victim) return false;
    await this.spill(victim);
    return true;
  }

  /** Spills idle contexts while more than the budget are resident (after a bind went over it). */
  async trim(): Promise<void> {
    while (this.residentCount() > this.maxResident && (await this.spillIdle())) {
      // each pass spilled one
    }
  }

  /** Every resident context to disk (the model is unloading; none is busy). */
  async spillAll(): Promise<void> {
    for (const x of [...this.contexts()]) if (x.seq !== undefined) await this.spill(x);
  }

  /** Lazy dependents keep pointing at c: its cells are unchanged, only stored elsewhere. */
  private async spill(c: KvContext): Promise<void> {
    mkdirSync(this.spillDir, { recursive: true });
    const path = join(this.spillDir, `${c.id}.kv`);
    writeFileAtomic(path, await this.ctx.stateSeqGet(c.seq as number));
    this.scheduler.freeSeqId(c.seq as number);
    c.seq = undefined;
    c.spillPath = path;
  }

  /** A sequence for a lazy fork: its source's cells over its tokens are added to it (seq_cp, no KV bytes). */
  private async bindLazy(c: KvContext): Promise<void> {
    const src = c.lazySource as KvContext;
    await this.makeResident(src);
    const seq = await this.allocSeq(src, true);
    // allocSeq may have spilled src only if it were not `keep`; it is, so src.seq holds.
    this.ctx.seqCopy(src.seq as number, seq, 0, c.tokens.length);
    c.seq = seq;
    c.lazySource = undefined;
    // Back within the budget: c shares the cells it needs, so the source (if idle) may go to disk.
    if (this.residentCount() > this.maxResident) await this.spillIdle(c);
  }

  private residentCount(): number {
    let n = 0;
    for (const x of this.contexts()) if (x.seq !== undefined) n++;
    return n;
  }

  private dependents(c: KvContext): KvContext[] {
    const out: KvContext[] = [];
    for (const x of this.contexts()) if (x.lazySource === c) out.push(x);
    return out;
  }
}
