import { wellFormed } from '../../libs/engine/src/prompt/well-formed';

describe('wellFormed', () => {
  it('replaces lone surrogates with U+FFFD, in nested strings, and keeps pairs', () => {
    const v = { content: 'h\ud800i', parts: ['\udc00x', 'ok \ud83d\ude00'], n: 1, none: null };
    expect(wellFormed(v)).toEqual({ content: 'h\ufffdi', parts: ['\ufffdx', 'ok \ud83d\ude00'], n: 1, none: null });
    // Twice in a row: a global pattern's state must not carry over between strings.
    expect(wellFormed(['\ud800', '\ud800', 'a\udbffb'])).toEqual(['\ufffd', '\ufffd', 'a\ufffdb']);
    expect(JSON.parse(JSON.stringify(wellFormed('\ud800\ud800')))).toBe('\ufffd\ufffd');
  });
});
