import { CallWatch } from '../../libs/engine/src/text/call-watch';

/** Where a tool call opens: the marker, split across tokens or not, outside a reasoning model's thoughts. */
describe('CallWatch', () => {
  const marker = /<tool_call>/;
  const feed = (w: CallWatch, pieces: string[]) => pieces.findIndex((p) => w.push(p));

  it('finds a marker split across pieces, once', () => {
    const w = new CallWatch(marker);
    expect(feed(w, ['Sure.', '<tool', '_call', '>\n{'])).toBe(3);
    expect(w.push('<tool_call>')).toBe(false);
  });

  it('ignores a marker inside thoughts the prompt opened, and finds one after them', () => {
    const w = new CallWatch(marker, { start: '<think>', ends: ['</think>'], openAtStart: true });
    expect(feed(w, ['maybe <tool_call> is', ' needed</th', 'ink>\n\n'])).toBe(-1);
    expect(feed(w, ['<tool_call>'])).toBe(0);
  });

  it('ignores a marker inside thoughts the model opens itself, across split tags', () => {
    const w = new CallWatch(marker, { start: '<think>', ends: ['</think>'], openAtStart: false });
    expect(feed(w, ['<thi', 'nk>a <tool_call> b</', 'think>', 'text '])).toBe(-1);
    expect(feed(w, ['<tool_', 'call>'])).toBe(1);
  });

  it('a short tag wholly inside the kept tail is not read twice', () => {
    // "<think>" (7) fits in the 7 characters kept after "</think>" (8) is the longest tag.
    const w = new CallWatch(marker, { start: '<think>', ends: ['</think>'], openAtStart: false });
    expect(feed(w, ['x<think>', 'y</think>', 'z'])).toBe(-1);
    expect(w.push('<tool_call>')).toBe(true);
  });
});
