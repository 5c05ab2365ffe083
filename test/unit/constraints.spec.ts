import { describeGbnfProblem } from '../../libs/engine/src/constraints/gbnf-check';
import { Lexicon } from '../../libs/engine/src/constraints/lexicon';
import { completionLogprobs } from '../../libs/dialects/src/openai/rendering/completion-renderer';
import { tokenDisplay } from '../../libs/engine/src/text/token-text';

describe('Lexicon', () => {
  const lx = Lexicon.fromText('# animals\ncat\ncats\ncar\n\n  dog  \ndon\'t\ncafé\ncat\n');

  it('reads one word per line, skipping comments, blanks, duplicates and non-words', () => {
    expect(lx.words).toEqual(['café', 'car', 'cat', 'cats', 'dog']);
    expect(lx.skipped).toBe(1);
  });

  it('builds a trie-shaped word rule: shared prefixes once, chains folded', () => {
    expect(lx.strictGrammar.split('\n')).toEqual([
      'root ::= word (" " word)*',
      'word ::= "ca" w1 | "dog"',
      'w1 ::= "fé" | "r" | "t" w2?',
      'w2 ::= "s"',
    ]);
  });

  it('treats ASCII letters and the list\'s own letters as word characters', () => {
    const lines = lx.grammar.split('\n');
    expect(lines[0]).toBe('root ::= sep* (word (sep+ word)* sep*)?');
    expect(lines[1]).toBe('sep ::= [^A-Za-zé]');
  });

  it('refuses a list without words', () => {
    expect(() => Lexicon.fromText('# nothing\n\n1234\n')).toThrow(/holds no words/);
  });

  it('stays small for many words sharing prefixes', () => {
    const words = Array.from({ length: 2000 }, (_, i) => `w${i.toString(36)}`.replace(/\d/g, (d) => 'abcdefghij'[Number(d)]));
    const g = Lexicon.fromText(words.join('\n')).strictGrammar;
    expect(g.split('\n').length).toBeLessThan(words.length);
  });
});

describe('describeGbnfProblem', () => {
  it('accepts what llama.cpp accepts', () => {
    expect(describeGbnfProblem('root ::= ("yes" | "no") (", " item){0,3} [a-z\\]-]+ .\n# c\nitem ::= [^"\\\\]* "\\x41\\u00e9"?')).toBeUndefined();
  });
  it('names the problem with its place', () => {
    expect(describeGbnfProblem('root ::= "abc')).toBe('line 1, column 14: unexpected end of input inside a string literal');
    expect(describeGbnfProblem('root ::= foo')).toBe('line 1, column 10: undefined rule "foo"');
    expect(describeGbnfProblem('start ::= "a"')).toBe('line 1, column 14: the grammar has no "root" rule');
    expect(describeGbnfProblem('root = "a"')).toBe('line 1, column 6: expecting "::=" after rule name "root"');
    expect(describeGbnfProblem('root ::= * "a"')).toBe('line 1, column 10: "*" has nothing before it to repeat');
    expect(describeGbnfProblem('root ::= ("a"\n')).toBe('line 2, column 1: expecting ")"');
  });
});

describe('completion logprobs formatting', () => {
  const tok = (s: string | Buffer) => {
    const b = Buffer.isBuffer(s) ? s : Buffer.from(s);
    return { token: tokenDisplay(b), bytes: Array.from(b), logprob: -1, top: [] };
  };

  it('writes a token that is part of a character as bytes:\\xNN', () => {
    expect(tokenDisplay(Buffer.from([0xc3]))).toBe('bytes:\\xc3');
    expect(tokenDisplay(Buffer.from([0xe2, 0x82]))).toBe('bytes:\\xe2\\x82');
    expect(tokenDisplay(Buffer.from('é'))).toBe('é');
  });

  it('gives character offsets into the returned text, a split character counted once', () => {
    const euro = Buffer.from('€'); // 3 bytes, split 2 + 1
    const lps = [tok('a'), tok(euro.subarray(0, 2)), tok(euro.subarray(2)), tok(' b'), tok('é')];
    const out = completionLogprobs(lps) as { tokens: string[]; text_offset: number[] };
    expect(out.tokens).toEqual(['a', 'bytes:\\xe2\\x82', 'bytes:\\xac', ' b', 'é']);
    const text = 'a€ bé';
    expect(out.text_offset).toEqual([0, 1, 1, 2, 4]);
    expect(text.slice(out.text_offset[3], out.text_offset[4])).toBe(' b');
  });
});

describe('describeGbnfProblem on rule names', () => {
  it('follows llama.cpp: no underscore in rule names', () => {
    expect(describeGbnfProblem('root ::= "a"\nfoo_bar ::= "x"')).toBe('line 2, column 4: expecting "::=" after rule name "foo"');
  });
});
