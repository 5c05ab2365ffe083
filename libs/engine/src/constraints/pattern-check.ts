/**
 * Regular expressions (a JSON schema's `pattern`) that llama.cpp's grammar cannot follow in
 * reasonable time. Its converter writes `X{n}` as n copies of X, and when X can match nothing
 * (`(b|c)*{100}`, `(a?){100}`) the grammar keeps one stack for every way to split the text
 * among the copies and walks them all for every token: measured on a 2-layer model, 16 tokens
 * took 2 s with 50 such copies and 32 s with 100, holding the engine thread (every other
 * request, a cancel and SIGTERM waited); the cost grows faster than the output too (16 copies:
 * 8.4 s for 256 tokens). Runs of up to MAX_NULLABLE_RUN are allowed (a real pattern has a few
 * optional pieces in a row); longer ones are refused before the request runs.
 */
export const MAX_NULLABLE_RUN = 8;

/** What a parsed piece can match as far as the check cares: nothing at all, and how many such copies it lines up. */
interface Piece {
  nullable: boolean;
  /** Copies that can match nothing, in a row, when the piece matches nothing. */
  width: number;
}

/**
 * The problem with a pattern, or undefined. `ecma`: one JavaScript cannot read is refused too
 * (an answer's format); a tool's parameters keep the patterns their authors wrote for Python
 * (`(?i)`, `(?P<name>…)`), which llama.cpp reads as best it can, as before.
 */
export function patternProblem(pattern: string, ecma = true): string | undefined {
  let run: number;
  try {
    run = new RegexScan(pattern).longestRun();
  } catch {
    return ecma ? invalidPattern(pattern) : undefined;
  }
  if (run <= MAX_NULLABLE_RUN) return ecma ? invalidPattern(pattern) : undefined;
  return `pattern ${JSON.stringify(pattern.length > 60 ? `${pattern.slice(0, 60)}…` : pattern)} repeats an expression that can match nothing ${run === Infinity ? 'without bound' : `${run} times`} in a row; llama.cpp's grammar would try every way to split the text among them (at most ${MAX_NULLABLE_RUN} are allowed)`;
}

/**
 * A schema's pattern is an ECMA-262 regular expression: one JavaScript cannot read is no pattern
 * at all (llama.cpp's converter read "^(a" as something, and the answer ignored it).
 */
function invalidPattern(pattern: string): string | undefined {
  try {
    new RegExp(pattern);
    return undefined;
  } catch (err) {
    const why = (err as Error).message.replace(/^Invalid regular expression: \/.*\/: /s, '');
    return `pattern ${JSON.stringify(pattern.length > 60 ? `${pattern.slice(0, 60)}…` : pattern)} is not a valid regular expression (${why})`;
  }
}

class RegexScan {
  private i = 0;
  private longest = 0;

  constructor(private readonly src: string) {}

  longestRun(): number {
    this.alternatives();
    if (this.i < this.src.length) throw new Error('unbalanced )');
    return this.longest;
  }

  /** Alternatives up to `)` or the end: nullable when one is, as wide as the widest such one. */
  private alternatives(): Piece {
    const out: Piece = { nullable: false, width: 0 };
    for (;;) {
      const seq = this.sequence();
      if (seq.nullable) {
        out.nullable = true;
        out.width = Math.max(out.width, seq.width);
      }
      if (this.src[this.i] !== '|') return out;
      this.i++;
    }
  }

  private sequence(): Piece {
    let run = 0;
    let all = true;
    while (this.i < this.src.length && this.src[this.i] !== '|' && this.src[this.i] !== ')') {
      const piece = this.item();
      if (!piece) continue;
      if (piece.nullable) run += Math.max(1, piece.width); // an empty alternative is a copy too
      else {
        all = false;
        run = 0;
      }
      this.longest = Math.max(this.longest, run);
    }
    return { nullable: all, width: all ? run : 0 };
  }

  /** One atom with its quantifiers; undefined for anchors. */
  private item(): Piece | undefined {
    const c = this.src[this.i++];
    if (c === '^' || c === '$') return undefined;
    let piece: Piece = { nullable: false, width: 0 };
    if (c === '(') {
      if (this.src[this.i] === '?') this.i += this.src[this.i + 1] === '<' ? 3 : 2; // (?: (?= (?! (?<= (?<!
      piece = this.alternatives();
      if (this.src[this.i++] !== ')') throw new Error('unclosed (');
    } else if (c === '[') this.skipClass();
    else if (c === '\\') this.i++;
    // Quantifiers apply in turn: llama.cpp reads `X*{3}` as (X*){3}.
    for (let q = this.quantifier(); q; q = this.quantifier()) piece = repeat(piece, q[0], q[1]);
    this.longest = Math.max(this.longest, piece.width);
    return piece;
  }

  private skipClass(): void {
    if (this.src[this.i] === '^') this.i++;
    if (this.src[this.i] === ']') this.i++;
    while (this.i < this.src.length && this.src[this.i] !== ']') this.i += this.src[this.i] === '\\' ? 2 : 1;
    if (this.i++ >= this.src.length) throw new Error('unclosed [');
  }

  private quantifier(): [number, number] | undefined {
    const c = this.src[this.i];
    let q: [number, number] | undefined;
    if (c === '*') q = [0, Infinity];
    else if (c === '+') q = [1, Infinity];
    else if (c === '?') q = [0, 1];
    else if (c === '{') {
      // As llama.cpp's converter reads braces: split on the comma, each side as std::stoi reads
      // it (leading spaces, trailing text ignored), an empty side meaning 0 or no bound.
      const close = this.src.indexOf('}', this.i);
      if (close < 0) throw new Error('unterminated {');
      const nums = this.src.slice(this.i + 1, close).split(',');
      const num = (t: string, empty: number): number => {
        if (t === '') return empty;
        const m = /^\s*[+-]?\d+/.exec(t);
        if (!m) throw new Error('invalid number in braces');
        return Number(m[0]);
      };
      if (nums.length === 1) q = [num(nums[0], NaN), num(nums[0], NaN)];
      else if (nums.length === 2) q = [num(nums[0], 0), num(nums[1], Infinity)];
      else throw new Error('wrong number of values in braces');
      if (Number.isNaN(q[0])) throw new Error('invalid number in braces');
      this.i = close;
    }
    if (!q) return undefined;
    this.i++;
    if (this.src[this.i] === '?' && c !== '?') this.i++; // lazy
    return q;
  }
}

/**
 * A piece repeated min..max times. Copies of a piece that can match nothing line up
 * (llama.cpp writes X{n} as n copies, X{n,} as n copies and a loop); an optional piece that
 * cannot is one optional copy ({0,n} nests its copies, one reachable at a time).
 */
function repeat(p: Piece, min: number, max: number): Piece {
  // An empty alternative is one copy too.
  if (p.nullable) return { nullable: true, width: Math.max(1, p.width) * (max === Infinity ? min + 1 : max) };
  return min === 0 ? { nullable: true, width: 1 } : p;
}
