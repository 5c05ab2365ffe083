import { NativeSampler, NativeSamplerOptions } from '../../libs/engine/src/backend/native-addon';
import { SamplerPool } from '../../libs/engine/src/scheduler/sampler-pool';

/** Stand-ins recording what the pool does to them; the real reset is covered end to end (openai-sampling). */
class FakeSampler implements NativeSampler {
  resets = 0;
  disposed = false;
  inUse = false;
  constructor(readonly opts: NativeSamplerOptions) {}
  acceptPrompt(): void {}
  reset(): void {
    if (this.inUse) throw new Error('sampler is in use by a step() in flight');
    this.resets++;
  }
  dispose(): void {
    this.disposed = true;
  }
}

describe('SamplerPool', () => {
  const made: FakeSampler[] = [];
  const pool = () => new SamplerPool((o) => {
    const s = new FakeSampler(o);
    made.push(s);
    return s;
  });
  beforeEach(() => (made.length = 0));

  it('hands a finished sampler, reset, to the next request with the same options only', () => {
    const p = pool();
    const a = p.take({ temperature: 0, ignoreEos: true }) as FakeSampler;
    p.give(a);
    expect(a.resets).toBe(1);
    expect(p.take({ temperature: 1, seed: 3 })).not.toBe(a);
    expect(p.take({ ignoreEos: true, temperature: 0 })).not.toBe(a); // another key order is another key: a new one
    expect(p.take({ temperature: 0, ignoreEos: true })).toBe(a);
    expect(p.reuses).toBe(1);
    expect(a.disposed).toBe(false);
  });

  it('hands a sampler given back twice to one request only', () => {
    const p = pool();
    const a = p.take({ temperature: 0 });
    p.give(a);
    p.give(a);
    expect(p.take({ temperature: 0 })).toBe(a);
    expect(p.take({ temperature: 0 })).not.toBe(a);
  });

  it('tells a ban (-Infinity) from other biases', () => {
    const p = pool();
    const banned = p.take({ logitBias: [[5, -Infinity]] });
    p.give(banned);
    expect(p.take({ logitBias: [[5, Number.NaN]] })).not.toBe(banned);
    expect(p.take({ logitBias: [[5, -Infinity]] })).toBe(banned);
  });

  it('never reuses a sampler with a grammar, a JSON schema or a chat prompt', () => {
    const p = pool();
    for (const o of [{ grammar: 'root ::= "a"' }, { jsonSchema: '{}' }, { chat: {} as NativeSamplerOptions['chat'] }]) {
      const s = p.take(o) as FakeSampler;
      p.give(s);
      expect(s.disposed).toBe(true);
      expect(p.take(o)).not.toBe(s);
    }
    expect(p.reuses).toBe(0);
  });

  it('keeps at most eight idle samplers, freeing the oldest', () => {
    const p = pool();
    const taken = Array.from({ length: 9 }, (_, i) => p.take({ seed: i }) as FakeSampler);
    for (const s of taken) p.give(s);
    expect(taken[0].disposed).toBe(true);
    expect(taken.slice(1).every((s) => !s.disposed)).toBe(true);
    p.clear();
    expect(taken.every((s) => s.disposed)).toBe(true);
  });

  it('says once when samplers cannot be reset at all (an addon built before reset existed)', () => {
    const p = pool();
    const warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      for (let i = 0; i < 3; i++) {
        const s = p.take({ temperature: 0 }) as FakeSampler;
        s.reset = () => {
          throw new TypeError('sampler.reset is not a function');
        };
        p.give(s);
        expect(s.disposed).toBe(true);
      }
      expect(warn).toHaveBeenCalledTimes(1);
    } finally {
      warn.mockRestore();
    }
  });

  it('frees, rather than keeps, a sampler it cannot reset', () => {
    const p = pool();
    const s = p.take({ temperature: 0 }) as FakeSampler;
    s.inUse = true;
    p.give(s);
    expect(s.disposed).toBe(true);
    expect(p.take({ temperature: 0 })).not.toBe(s);
  });
});
