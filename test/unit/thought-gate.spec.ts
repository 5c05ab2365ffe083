import { ThoughtGate } from '../../libs/engine/src/text/thought-gate';

const TAGS = { start: '<think>', ends: ['</think>'], openAtStart: true };

describe('ThoughtGate', () => {
  it('a block the prompt opened: thoughts and the closing tag split across pushes, then the answer', () => {
    const g = new ThoughtGate(TAGS);
    expect(g.push('plan a</thi')).toEqual({ thought: 'plan a', answer: '' });
    expect(g.push('nk>\n\nHi')).toEqual({ thought: '</think>', answer: '\n\nHi' });
    expect(g.push(' there </think>')).toEqual({ thought: '', answer: ' there </think>' });
  });

  it('a block the model opens itself (after whitespace), and an answer without one', () => {
    const g = new ThoughtGate({ ...TAGS, openAtStart: false });
    expect(g.push('  <th')).toEqual({ thought: '', answer: '' });
    expect(g.push('ink>x</think>y')).toEqual({ thought: '  <think>x</think>', answer: 'y' });
    const plain = new ThoughtGate({ ...TAGS, openAtStart: false });
    expect(plain.push('<b>Hello')).toEqual({ thought: '', answer: '<b>Hello' });
  });

  it('what is held at the end is thought inside the block, answer outside it', () => {
    const open = new ThoughtGate(TAGS);
    expect(open.push('still thinking </')).toEqual({ thought: 'still thinking ', answer: '' });
    expect(open.flush()).toEqual({ thought: '</', answer: '' });
    const undecided = new ThoughtGate({ ...TAGS, openAtStart: false });
    expect(undecided.push('<thi')).toEqual({ thought: '', answer: '' });
    expect(undecided.flush()).toEqual({ thought: '', answer: '<thi' });
  });
});
