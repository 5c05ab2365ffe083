/**
 * Names what is wrong with a GBNF grammar that llama.cpp refused. llama.cpp
 * prints its parse error to stderr and reports only "failed to parse grammar",
 * so this follows its grammar parser (llama-grammar.cpp) closely enough to say
 * where and why. Advisory only: llama.cpp stays the judge of what is valid.
 */
export function describeGbnfProblem(src: string): string | undefined {
  try {
    new GbnfChecker(src).run();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * A repetition {m,n} with m above n, which llama.cpp's parser does not refuse: it expands it
 * without end, on the thread that builds the sampler (the event loop), until memory runs out.
 * Checked before llama.cpp sees the grammar; literals, classes and comments are skipped.
 */
export function invertedRepetition(src: string): string | undefined {
  const code = src.replace(/"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|#[^\n]*/g, (m) => ' '.repeat(m.length));
  for (const m of code.matchAll(/\{\s*(\d+)\s*,\s*(\d+)\s*\}/g)) {
    if (Number(m[1]) > Number(m[2])) {
      const before = src.slice(0, m.index).split('\n');
      return `line ${before.length}, column ${before[before.length - 1].length + 1}: the repetition ${m[0]} has its minimum above its maximum`;
    }
  }
  return undefined;
}

// llama.cpp rule names: letters, digits and hyphens (no underscore).
const WORD = /[A-Za-z0-9-]/;

class GbnfChecker {
  private pos = 0;
  private readonly defined = new Set<string>();
  private readonly used = new Map<string, number>();

  constructor(private readonly src: string) {}

  run(): void {
    this.space(true);
    while (this.pos < this.src.length) this.rule();
    for (const [name, at] of this.used) if (!this.defined.has(name)) this.fail(`undefined rule "${name}"`, at);
    if (!this.defined.has('root')) this.fail('the grammar has no "root" rule', this.src.length);
  }

  private rule(): void {
    const name = this.name();
    this.space(false);
    if (!this.src.startsWith('::=', this.pos)) this.fail(`expecting "::=" after rule name "${name}"`);
    this.pos += 3;
    this.space(true);
    this.alternates(false);
    const c = this.src[this.pos];
    if (c === '\r') this.pos += this.src[this.pos + 1] === '\n' ? 2 : 1;
    else if (c === '\n') this.pos++;
    else if (c !== undefined) this.fail(`expecting a newline or the end after rule "${name}", found "${c}"`);
    this.defined.add(name);
    this.space(true);
  }

  private alternates(nested: boolean): void {
    this.sequence(nested);
    while (this.src[this.pos] === '|') {
      this.pos++;
      this.space(true);
      this.sequence(nested);
    }
  }

  private sequence(nested: boolean): void {
    let items = 0;
    for (;;) {
      const c = this.src[this.pos];
      if (c === '"') {
        this.pos++;
        while (this.src[this.pos] !== '"') this.char('string literal');
        this.pos++;
      } else if (c === '[') {
        this.pos++;
        if (this.src[this.pos] === '^') this.pos++;
        while (this.src[this.pos] !== ']') {
          this.char('character class');
          if (this.src[this.pos] === '-' && this.src[this.pos + 1] !== ']') {
            this.pos++;
            this.char('character range');
          }
        }
        this.pos++;
      } else if (c !== undefined && WORD.test(c)) {
        const at = this.pos;
        const name = this.name();
        if (!this.used.has(name)) this.used.set(name, at);
      } else if (c === '(') {
        this.pos++;
        this.space(true);
        this.alternates(true);
        if (this.src[this.pos] !== ')') this.fail('expecting ")"');
        this.pos++;
      } else if (c === '.') {
        this.pos++;
      } else if (c === '<') {
        const end = this.src.indexOf('>', this.pos);
        if (end < 0) this.fail('expecting ">" to close a token reference');
        this.pos = end + 1;
      } else if (c === '*' || c === '+' || c === '?') {
        if (items === 0) this.fail(`"${c}" has nothing before it to repeat`);
        this.pos++;
        items--;
      } else if (c === '{') {
        if (items === 0) this.fail('"{" has nothing before it to repeat');
        const m = /^\{\s*\d+\s*(,\s*\d*\s*)?\}/.exec(this.src.slice(this.pos));
        if (!m) this.fail('expecting a repetition count {m}, {m,} or {m,n}');
        this.pos += m[0].length;
        items--;
      } else break;
      items++;
      this.space(nested);
    }
  }

  /** One character of a literal or class, escapes included. */
  private char(what: string): void {
    const c = this.src[this.pos];
    if (c === undefined) this.fail(`unexpected end of input inside a ${what}`);
    if (c !== '\\') {
      this.pos += c.codePointAt(0)! > 0xffff ? 2 : 1;
      return;
    }
    const e = this.src[this.pos + 1];
    const hex = { x: 2, u: 4, U: 8 }[e as 'x' | 'u' | 'U'];
    if (hex) {
      if (!new RegExp(`^[0-9a-fA-F]{${hex}}`).test(this.src.slice(this.pos + 2))) this.fail(`expecting ${hex} hex digits after "\\${e}"`);
      this.pos += 2 + hex;
    } else if (e !== undefined && '"[]\\tnr'.includes(e)) this.pos += 2;
    else this.fail(`unknown escape "\\${e ?? ''}"`);
  }

  private name(): string {
    const start = this.pos;
    while (this.pos < this.src.length && WORD.test(this.src[this.pos])) this.pos++;
    if (this.pos === start) this.fail(`expecting a rule name, found "${this.src[start] ?? 'the end'}"`);
    return this.src.slice(start, this.pos);
  }

  /** Whitespace and # comments; newlines only where allowed. */
  private space(newlines: boolean): void {
    for (;;) {
      const c = this.src[this.pos];
      if (c === ' ' || c === '\t' || (newlines && (c === '\n' || c === '\r'))) this.pos++;
      else if (c === '#') while (this.pos < this.src.length && this.src[this.pos] !== '\n') this.pos++;
      else return;
    }
  }

  private fail(msg: string, at = this.pos): never {
    const before = this.src.slice(0, at).split('\n');
    throw new Error(`line ${before.length}, column ${before[before.length - 1].length + 1}: ${msg}`);
  }
}
