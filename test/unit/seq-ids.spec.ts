import { SeqIds } from '../../libs/engine/src/scheduler/seq-ids';

describe('SeqIds (free sequence ids with sampler affinity)', () => {
  it('hands out 0 up, then the most recently freed', () => {
    const ids = new SeqIds(4);
    expect([ids.take(), ids.take()]).toEqual([0, 1]);
    ids.give(0);
    expect(ids.take()).toBe(0);
    expect(ids.size).toBe(2);
  });

  it('prefers a free id that last ran the same sampler configuration', () => {
    const ids = new SeqIds(8);
    const a = ids.take('greedy')!;
    const b = ids.take('hot')!;
    ids.ran(a, 'greedy');
    ids.ran(b, 'hot');
    ids.give(a);
    ids.give(b); // most recently freed: b
    expect(ids.take('greedy')).toBe(a);
    ids.give(a);
    expect(ids.take('hot')).toBe(b);
    // No match: the most recently freed, whatever it ran.
    expect(ids.take('other')).toBe(a);
    expect(ids.size).toBe(6);
  });

  it('forgets a configuration once a request sampled on the CPU ran there', () => {
    const ids = new SeqIds(3);
    const a = ids.take()!;
    const b = ids.take()!;
    ids.ran(a, 'greedy');
    ids.ran(b, 'greedy');
    ids.ran(a, undefined); // top logprobs or a grammar: its graph sampler is gone
    ids.give(b);
    ids.give(a); // a is the most recently freed, but only b still holds 'greedy'
    expect(ids.take('greedy')).toBe(b);
    expect(ids.take('greedy')).toBe(a);
  });
});
