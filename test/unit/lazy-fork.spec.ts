import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ContextRegistry } from '../../libs/engine/src/contexts/context-registry';
import { KvContext } from '../../libs/engine/src/contexts/kv-context';
import { KvLock } from '../../libs/engine/src/scheduler/kv-lock';
import { SessionBinding } from '../../libs/engine/src/scheduler/sequence';

/**
 * The registry over a model of the unified KV cache: a cell holds the tokens
 * its value was computed from (what attention would have read), so a sequence
 * that lost or borrowed a wrong cell is seen. Random operations run
 * concurrently through the same lock as the real scheduler; at each quiet
 * point every context must hold exactly the cells of its tokens.
 */
class FakeKv {
  readonly seqs = new Map<number, Map<number, string>>();
  readonly nSeqMax: number;
  constructor(n: number) {
    this.nSeqMax = n;
  }
  cells(seq: number): Map<number, string> {
    let m = this.seqs.get(seq);
    if (!m) this.seqs.set(seq, (m = new Map()));
    return m;
  }
  seqCopy(src: number, dst: number, p0: number, p1: number): void {
    const to = this.cells(dst);
    for (const [pos, v] of this.cells(src)) if ((p0 < 0 || pos >= p0) && (p1 < 0 || pos < p1)) to.set(pos, v);
  }
  seqRemove(seq: number, p0: number, p1: number): boolean {
    const m = this.cells(seq);
    for (const pos of [...m.keys()]) if ((p0 < 0 || pos >= p0) && (p1 < 0 || pos < p1)) m.delete(pos);
    return true;
  }
  /** A decode: the new cell reads the cell before it in the same sequence. */
  decode(seq: number, pos: number, token: number): void {
    const m = this.cells(seq);
    const prev = pos === 0 ? '' : m.get(pos - 1);
    m.set(pos, prev === undefined ? 'BROKEN' : `${prev}${token},`);
  }
  async stateSeqGet(seq: number): Promise<Buffer> {
    return Buffer.from(JSON.stringify([...this.cells(seq)]));
  }
  async stateSeqSet(seq: number, data: Buffer): Promise<number> {
    this.seqRemove(seq, -1, -1);
    for (const [pos, v] of JSON.parse(data.toString()) as [number, string][]) this.cells(seq).set(pos, v);
    return data.length;
  }
  requestYield(): void {}
  createSampler(): unknown {
    return {};
  }
}

class FakeScheduler {
  readonly lock = new KvLock();
  readonly free: number[] = [];
  pressure?: () => Promise<boolean>;
  constructor(readonly kv: FakeKv) {
    for (let s = kv.nSeqMax - 1; s >= 0; s--) this.free.push(s);
  }
  exclusive<T>(fn: () => T | Promise<T>): Promise<T> {
    return this.lock.run(fn);
  }
  allocSeq(): number | undefined {
    return this.free.pop();
  }
  freeSeqId(seq: number): void {
    this.kv.seqRemove(seq, -1, -1);
    this.free.push(seq);
  }
  get availableSeqs(): number {
    return this.free.length;
  }
  onKvPressure(fn: () => Promise<boolean>): void {
    this.pressure = fn;
  }
  /** Context prefill (create): what Scheduler does for a session with maxTokens 0. */
  submit(spec: { promptTokens: Int32Array; session: SessionBinding }): AsyncIterable<unknown> {
    const run = async () => {
      await this.run(spec.session, spec.promptTokens, []);
    };
    return (async function* () {
      await run();
    })();
  }
  /** resumeSession, decode steps (another operation may run between them), release. */
  async run(b: SessionBinding, prompt: Int32Array, gen: number[]): Promise<void> {
    const kept = Math.min(b.held.length, prompt.length - 1);
    await this.exclusive(() => this.kv.seqRemove(b.seq, kept, -1));
    // The prompt's first step may come later (a batch full of other prompts): operations run between.
    await this.exclusive(() => {
      for (let p = kept; p < prompt.length; p++) this.kv.decode(b.seq, p, prompt[p]);
    });
    const all = [...prompt, ...gen];
    for (let i = 0; i + 1 < gen.length; i++) {
      await this.exclusive(() => this.kv.decode(b.seq, prompt.length + i, gen[i]));
    }
    b.onRelease(Int32Array.from(all.slice(0, prompt.length + Math.max(0, gen.length - 1))), true);
  }
}

const expected = (tokens: Int32Array, n: number) => Array.from(tokens.subarray(0, n + 1), (t) => `${t},`).join('');

/** Every cell 0..n-1 of `cells` is the one computed from these tokens, and there is nothing past n when exact. */
function checkCells(id: string, cells: Map<number, string>, tokens: Int32Array, n: number, exact: boolean): void {
  for (let p = 0; p < n; p++) expect([id, p, cells.get(p)]).toEqual([id, p, expected(tokens, p)]);
  if (exact) expect([id, [...cells.keys()].filter((p) => p >= n)]).toEqual([id, []]);
}

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

describe('a context a request is bound to, read before its first step', () => {
  it('holds one cell per token when the prompt is exactly what it holds (its last token is decoded again)', async () => {
    const kv = new FakeKv(8);
    const sched = new FakeScheduler(kv);
    const reg = new ContextRegistry({} as never, kv as never, sched as never, mkdtempSync(join(tmpdir(), 'svc-bound-')), 4);
    const tokens = Int32Array.from([1, 2, 3, 4, 5]);
    const c = await reg.create('', tokens);
    const b = await reg.bind(c, tokens, c.id);
    // resumeSession's cut, then a snapshot and a fork before the step that decodes the token again.
    await sched.exclusive(() => kv.seqRemove(b.seq, Math.min(b.held.length, tokens.length - 1), -1));
    const read = await reg.readState(c);
    checkCells(c.id, new Map(JSON.parse(read.state.toString())), read.tokens, read.tokens.length, true);
    const [child] = (await reg.fork(c, 1)).children;
    const r2 = await reg.readState(child);
    checkCells(child.id, new Map(JSON.parse(r2.state.toString())), r2.tokens, r2.tokens.length, true);
    expect(read.tokens.length).toBe(4);
  });
});

describe('lazy forks over a model of the KV cache', () => {
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
    it(`random concurrent operations keep every context's cells (seed ${seed})`, async () => {
      const r = rng(seed);
      const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)];
      const randTokens = (n: number) => Int32Array.from({ length: n }, () => 1 + Math.floor(r() * 5));
      const kv = new FakeKv(8);
      const sched = new FakeScheduler(kv);
      const spillDir = mkdtempSync(join(tmpdir(), 'svc-lazy-fork-'));
      const reg = new ContextRegistry({} as never, kv as never, sched as never, spillDir, 4);
      const ignore = (err: unknown) => {
        // 409 busy, 400 divergent prompt, 404 deleted meanwhile, 429 no sequence left: all legitimate under this load.
        if (![409, 400, 404, 429].includes((err as { status?: number }).status ?? 0)) throw err;
      };
      const live = () => reg.list('');

      const ops: Array<() => Promise<unknown>> = [
        () => reg.create('', randTokens(Math.floor(r() * 12))),
        () => (live().length ? reg.fork(pick(live()), 1 + Math.floor(r() * 3)) : Promise.resolve()),
        async () => {
          const c = pick(live());
          if (c) await reg.truncate(c, Math.floor(r() * (c.tokens.length + 1)));
        },
        async () => {
          const c = pick(live());
          if (c) await reg.delete(c);
        },
        async () => {
          const c = pick(live());
          if (!c) return;
          // Continue it, or rewrite its last few tokens (re-tokenization slack).
          const keep = r() < 0.7 ? c.tokens.length : Math.max(0, c.tokens.length - Math.floor(r() * 4));
          // Sometimes exactly what it holds: the scheduler then decodes its last token again.
          const same = keep === c.tokens.length && keep > 0 && r() < 0.25;
          const prompt = Int32Array.from([...c.tokens.subarray(0, keep), ...randTokens(same ? 0 : 1 + Math.floor(r() * 4))]);
          const gen = Array.from(randTokens(Math.floor(r() * 4)));
          const b = await reg.bind(c, prompt, c.id);
          await sched.run(b, prompt, gen);
        },
        async () => {
          const c = pick(live());
          if (!c) return;
          // Read with its cells in one KV section, also while a request generates on it.
          const { state: raw, tokens } = await reg.readState(c);
          const state = new Map<number, string>(JSON.parse(raw.toString()));
          checkCells(c.id, state, tokens, tokens.length, true);
        },
        () => sched.exclusive(() => sched.pressure?.()), // KV full inside a decode step
      ];

      for (let round = 0; round < 80; round++) {
        await Promise.all(Array.from({ length: 1 + Math.floor(r() * 4) }, () => pick(ops)().catch(ignore)));
        // Quiet point: check every context against its tokens.
        for (const c of live()) {
          if (c.seq !== undefined) {
            checkCells(c.id, kv.cells(c.seq), c.tokens, c.tokens.length, true);
          } else if (c.lazySource) {
            const src: KvContext = c.lazySource;
            expect(src.lazySource).toBeUndefined();
            expect(live()).toContain(src);
            const cells = src.seq !== undefined ? kv.cells(src.seq) : new Map<number, string>(JSON.parse(readFileSync(src.spillPath as string).toString()));
            checkCells(c.id, cells, c.tokens, c.tokens.length, false);
          } else {
            // A file inherited from a deleted source holds its cells past the heir's tokens, cut when it comes back.
            if (c.spillCells !== undefined) expect([c.id, c.spillCells]).toEqual([c.id, c.tokens.length]);
            checkCells(c.id, new Map(JSON.parse(readFileSync(c.spillPath as string).toString())), c.tokens, c.tokens.length, c.spillCells === undefined);
          }
        }
        const held = live().filter((c) => c.seq !== undefined);
        expect(new Set(held.map((c) => c.seq)).size).toBe(held.length);
        expect(held.length).toBeLessThanOrEqual(4);
      }
      // Deleting everything gives every sequence id back.
      for (const c of live()) await reg.delete(c);
      expect(sched.free.length).toBe(kv.nSeqMax);
    });
  }
});
