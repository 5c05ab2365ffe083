import { StopMatcher } from '../../libs/engine/src/text/stop-matcher';

function feed(stops: string[], pieces: string[]): { out: string; stop?: string } {
  const m = new StopMatcher(stops);
  let out = '';
  for (const p of pieces) {
    const r = m.push(p);
    out += r.emit;
    if (r.stop !== undefined) return { out, stop: r.stop };
  }
  return { out: out + m.flush() };
}

describe('StopMatcher', () => {
  it('passes text through without stops', () => {
    expect(feed([], ['a', 'b'])).toEqual({ out: 'ab' });
  });
  it('finds a stop split across pieces and never emits it', () => {
    expect(feed(['END'], ['hello E', 'N', 'D world'])).toEqual({ out: 'hello ', stop: 'END' });
  });
  it('releases held text that turned out not to be a stop', () => {
    const m = new StopMatcher(['END']);
    expect(m.push('abE').emit).toBe('ab');
    expect(m.push('x').emit).toBe('Ex');
  });
  it('picks the earliest of several stops', () => {
    expect(feed(['world', 'lo w'], ['hello world'])).toEqual({ out: 'hel', stop: 'lo w' });
  });
  it('flushes a trailing partial match at the end', () => {
    expect(feed(['END'], ['abc', 'EN'])).toEqual({ out: 'abcEN' });
  });
});
