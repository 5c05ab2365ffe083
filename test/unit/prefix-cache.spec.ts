import { NativeContext } from '../../libs/engine/src/backend/native-addon';
import { PrefixCache, PrefixCacheLimits, commonPrefix } from '../../libs/engine/src/scheduler/prefix-cache';

const t = (...xs: number[]) => Int32Array.from(xs);
const run = (from: number, n: number) => Int32Array.from({ length: n }, (_, i) => from + i);
const cat = (a: Int32Array, b: Int32Array) => Int32Array.from([...a, ...b]);

/** Records the KV operations the cache asks for; a sequence's "state" is its token count as text. */
function fakeCtx() {
  const ops: string[] = [];
  const ctx = {
    seqCopy: (src: number, dst: number, p0: number, p1: number) => void ops.push(`cp ${src}->${dst} [${p0},${p1})`),
    seqRemove: (seq: number, p0: number, p1: number) => (ops.push(`rm ${seq} [${p0},${p1})`), true),
    stateSeqGet: async (seq: number) => (ops.push(`get ${seq}`), Buffer.alloc(100)),
    stateSeqSet: async (seq: number, data: Buffer) => (ops.push(`set ${seq} ${data.length}`), data.length),
  } as unknown as NativeContext;
  return { ctx, ops };
}

function cache(limits: Partial<PrefixCacheLimits> = {}) {
  const { ctx, ops } = fakeCtx();
  const freed: number[] = [];
  const c = new PrefixCache(ctx, { maxEntries: 4, maxResidentPositions: 1000, maxHostBytes: 1000, ...limits }, (s) => void freed.push(s));
  return { c, ops, freed };
}

describe('PrefixCache', () => {
  it('matches the longest common prefix', () => {
    const { c } = cache();
    c.retain(1, t(1, 2, 3, 4));
    c.retain(2, t(1, 2, 9));
    expect(c.match(t(1, 2, 3, 7))).toMatchObject({ entry: { seq: 1 }, length: 3 });
    expect(c.match(t(5))).toBeUndefined();
  });
  it('frees entries made redundant by a longer one', () => {
    const { c } = cache();
    c.retain(1, t(1, 2));
    expect(c.retain(2, t(1, 2, 3))).toEqual([1]);
    expect(c.size).toBe(1);
  });
  it('shares retained prompts within a partition only (an owner key), and keeps each partition its own', async () => {
    const { c, ops } = cache();
    c.retain(1, t(1, 2, 3, 4), 4, 'alice');
    expect(c.match(t(1, 2, 3, 7), 'bob')).toBeUndefined();
    expect(c.match(t(1, 2, 3, 7))).toBeUndefined();
    expect(await c.reuse(t(1, 2, 3, 7), 5, 'bob')).toEqual({ n: 0 });
    expect(ops).toEqual([]);
    // bob's longer prompt makes alice's entry redundant only for bob: hers stays.
    expect(c.retain(2, t(1, 2, 3, 4, 5), 5, 'bob')).toEqual([]);
    expect(c.size).toBe(2);
    expect(c.match(t(1, 2, 3, 4, 5), 'alice')).toMatchObject({ entry: { seq: 1 }, length: 4 });
    expect(c.match(t(1, 2, 3, 4, 5), 'bob')).toMatchObject({ entry: { seq: 2 }, length: 5 });
  });
  it('evicts least recently used past its bounds', () => {
    const { c } = cache({ maxEntries: 2 });
    c.retain(1, t(1));
    c.retain(2, t(2));
    c.match(t(1));
    expect(c.retain(3, t(3))).toEqual([2]);
    const small = cache({ maxResidentPositions: 5 }).c;
    small.retain(1, t(1, 1, 1));
    expect(small.retain(2, t(2, 2, 2))).toEqual([1]);
  });
  it('shares resident cells and never decodes the last prompt token again from the cache', async () => {
    const { c, ops } = cache();
    c.retain(1, t(1, 2, 3));
    const r = await c.reuse(t(1, 2, 3), 7);
    expect(r.n).toBe(2);
    expect(r.shared?.seq).toBe(1);
    expect(ops).toEqual(['cp 1->7 [0,2)']);
  });
  it('moves what no running request shares to host memory, and writes it back on a match', async () => {
    const { c, ops, freed } = cache();
    const a = run(100, 40);
    const b = run(200, 40);
    expect(c.demotesWhileRunning).toBe(false); // nothing resident
    c.retain(1, a);
    c.retain(2, b);
    expect(c.demotesWhileRunning).toBe(true);
    const e1 = c.match(a.subarray(0, 1))!.entry;
    await c.demoteIdle(new Map([[e1, 2]]));
    // entry 1 keeps the 2 shared positions resident; entry 2 leaves the KV cache entirely
    expect(ops).toEqual(['get 1', 'rm 1 [2,-1)', 'get 2']);
    expect(freed).toEqual([2]);
    expect(c.residentCount).toBe(1);
    expect(c.hostBytes).toBe(200);
    ops.length = 0;
    const r = await c.reuse(cat(b, t(7)), 9);
    expect(r).toEqual({ n: 40 });
    expect(ops).toEqual(['set 9 100', 'rm 9 [40,-1)']);
    expect(c.promotions).toBe(1);
    // within the resident prefix: shared again; past it: written back from memory
    ops.length = 0;
    expect((await c.reuse(cat(a.subarray(0, 2), t(0)), 10)).shared).toBe(e1);
    expect((await c.reuse(cat(a, t(5)), 11)).n).toBe(40);
    expect(ops).toEqual(['cp 1->10 [0,2)', 'set 11 100', 'rm 11 [40,-1)']);
  });
  it('a retained prompt too short to be written back is dropped when it leaves the KV cache, not read out', async () => {
    const { c, ops, freed } = cache();
    c.retain(1, run(100, 31));
    c.retain(2, run(200, 32));
    expect(await c.demoteOneIdle()).toBe(true);
    expect(ops).toEqual([]); // entry 1 (31 tokens, least recently used) goes first: no state read
    expect(freed).toEqual([1]);
    expect(c.size).toBe(1);
    expect(await c.demoteOneIdle()).toBe(true);
    expect(ops).toEqual(['get 2']);
    expect(freed).toEqual([1, 2]);
    expect(c.size).toBe(1); // entry 2 lives on in host memory
    expect(await c.demoteOneIdle()).toBe(false);
    // while another request decodes: the short one is dropped too, keeping what is shared
    const { c: d, ops: dops } = cache();
    d.retain(3, run(300, 20));
    const e3 = d.match(run(300, 1))!.entry;
    await d.demoteIdle(new Map([[e3, 5]]));
    expect(dops).toEqual(['rm 3 [5,-1)']);
    expect(d.residentCount).toBe(1);
  });
  it('a short match is prefilled again rather than writing a whole state back', async () => {
    const { c, ops } = cache();
    c.retain(1, run(100, 400));
    await c.demoteIdle(new Map());
    ops.length = 0;
    // 40 of 400 tokens: not worth a 400-token state write
    expect(await c.reuse(cat(run(100, 40), t(1)), 5)).toEqual({ n: 0 });
    expect(ops).toEqual([]);
  });
  it('with the KV cache on a device, entries stay resident until cells run short, and then only the prompt part goes to host memory', async () => {
    const { c, ops, freed } = cache({ kvOnDevice: true });
    c.retain(1, run(100, 40), 35); // prompt 100..134, generated 135..139
    expect(c.demotesWhileRunning).toBe(false);
    await c.demoteIdle(new Map());
    expect(await c.demoteOneIdle()).toBe(false);
    expect(ops).toEqual([]);
    expect(c.residentCount).toBe(1);
    expect(await c.relieve()).toBe(true);
    expect(ops).toEqual(['rm 1 [35,-1)', 'get 1']);
    expect(freed).toEqual([1]);
    expect(c.match(run(100, 40))).toMatchObject({ length: 35 });
  });
  it('with the KV cache on a device, a sequence too short to be shared is not kept', async () => {
    const { c } = cache({ kvOnDevice: true });
    expect(c.retain(1, run(100, 31))).toEqual([1]);
    expect(c.size).toBe(0);
    expect(c.retain(2, run(100, 32))).toEqual([]);
    expect(c.size).toBe(1);
    // Nor is one whose prompt part is that short, once cells run short: it is dropped, not read out.
    const dev = cache({ kvOnDevice: true });
    dev.c.retain(3, run(100, 40), 10);
    expect(await dev.c.relieve()).toBe(true);
    expect(dev.ops).toEqual([]);
    expect(dev.freed).toEqual([3]);
    expect(dev.c.size).toBe(0);
    // On a CPU a short one is kept: there every shared token saves compute.
    const cpu = cache();
    expect(cpu.c.retain(1, t(1, 2, 3))).toEqual([]);
    expect(cpu.c.size).toBe(1);
  });
  it('with the KV cache on a device, a short match is prefilled again rather than shared', async () => {
    const { c, ops } = cache({ kvOnDevice: true });
    c.retain(1, run(100, 40));
    expect(await c.reuse(cat(run(100, 3), t(1, 2, 3)), 5)).toEqual({ n: 0 });
    expect(ops).toEqual([]);
    expect((await c.reuse(cat(run(100, 32), t(1)), 6)).n).toBe(32);
    expect(ops).toEqual(['cp 1->6 [0,32)']);
  });
  it('drops entries instead when there is no host memory for them', async () => {
    const { c, ops, freed } = cache({ maxHostBytes: 0 });
    c.retain(1, t(1, 2, 3));
    await c.demoteIdle(new Map());
    expect(ops).toEqual([]);
    expect(freed).toEqual([1]);
    expect(c.size).toBe(0);
  });
  it('keeps host memory within its bound, least recently used out first', async () => {
    const { c } = cache({ maxHostBytes: 150 });
    c.retain(1, run(100, 32));
    c.retain(2, run(200, 32));
    await c.demoteIdle(new Map());
    expect(c.hostBytes).toBe(100);
    expect(c.size).toBe(1);
    expect(c.match(t(200))).toBeDefined();
  });
  it('while nothing runs, moves retained prompts to host memory one per call, least recently used first', async () => {
    const { c, ops, freed } = cache();
    c.retain(1, run(100, 32));
    c.retain(2, run(200, 32));
    expect(await c.demoteOneIdle()).toBe(true);
    expect(ops).toEqual(['get 1']);
    expect(freed).toEqual([1]);
    expect(await c.demoteOneIdle()).toBe(true);
    expect(await c.demoteOneIdle()).toBe(false);
    expect(c.residentCount).toBe(0);
    expect(c.size).toBe(2);
  });
  it('while nothing runs, without a host tier, nothing is dropped', async () => {
    const { c, ops } = cache({ maxHostBytes: 0 });
    c.retain(1, t(1, 1));
    c.retain(2, t(2, 2));
    expect(await c.demoteOneIdle()).toBe(false);
    expect(ops).toEqual([]);
    expect(c.residentCount).toBe(2);
  });
  it('commonPrefix counts equal leading tokens', () => {
    expect(commonPrefix(t(1, 2, 3), t(1, 2, 4))).toBe(2);
    expect(commonPrefix(t(), t(1))).toBe(0);
  });
});
