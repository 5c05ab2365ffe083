import { PrefixCache, commonPrefix } from '../../libs/engine/src/scheduler/prefix-cache';

const t = (...xs: number[]) => Int32Array.from(xs);

describe('PrefixCache', () => {
  it('matches the longest common prefix', () => {
    const c = new PrefixCache(4, 1000);
    c.retain(1, t(1, 2, 3, 4));
    c.retain(2, t(1, 2, 9));
    expect(c.match(t(1, 2, 3, 7))).toMatchObject({ entry: { seq: 1 }, length: 3 });
    expect(c.match(t(5))).toBeUndefined();
  });
  it('frees entries made redundant by a longer one', () => {
    const c = new PrefixCache(4, 1000);
    c.retain(1, t(1, 2));
    expect(c.retain(2, t(1, 2, 3))).toEqual([1]);
    expect(c.size).toBe(1);
  });
  it('evicts least recently used past its bounds', () => {
    const c = new PrefixCache(2, 1000);
    c.retain(1, t(1));
    c.retain(2, t(2));
    c.match(t(1));
    expect(c.retain(3, t(3))).toEqual([2]);
    const small = new PrefixCache(8, 5);
    small.retain(1, t(1, 1, 1));
    expect(small.retain(2, t(2, 2, 2))).toEqual([1]);
  });
  it('commonPrefix counts equal leading tokens', () => {
    expect(commonPrefix(t(1, 2, 3), t(1, 2, 4))).toBe(2);
    expect(commonPrefix(t(), t(1))).toBe(0);
  });
});
