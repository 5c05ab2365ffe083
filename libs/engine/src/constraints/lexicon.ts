import { readFileSync } from 'node:fs';
import { StartupError } from '../core/errors';

/**
 * The -lexicon word list and the two GBNF grammars made from it, fed through
 * the ordinary grammar constraint path.
 *
 * File: one word per line; blank lines and lines starting with '#' are
 * ignored; surrounding whitespace is trimmed. A word is letters only (Unicode
 * letters and combining marks); other lines (e.g. "don't") are skipped and
 * counted, so a stock word list loads.
 *
 * svc_lexicon: every run of letters in the output is a listed word, in the case
 * it is listed. Letters are A-Z, a-z and every non-ASCII character that occurs
 * in a listed word; everything else (spaces, punctuation, digits, newlines,
 * other characters) is free.
 * svc_lexicon_strict: the output is listed words separated by single spaces,
 * at least one word, nothing else.
 */
export class Lexicon {
  /** GBNF for svc_lexicon. */
  readonly grammar: string;
  /** GBNF for svc_lexicon_strict. */
  readonly strictGrammar: string;

  private constructor(
    readonly words: string[],
    /** Lines that were not a word. */
    readonly skipped: number,
  ) {
    const word = trieRules(words);
    this.strictGrammar = ['root ::= word (" " word)*', ...word].join('\n');
    const ascii = new Set('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz');
    const extra = [...new Set(words.join(''))].filter((c) => !ascii.has(c)).sort();
    this.grammar = ['root ::= sep* (word (sep+ word)* sep*)?', `sep ::= [^A-Za-z${extra.map(classChar).join('')}]`, ...word].join('\n');
  }

  static fromFile(path: string): Lexicon {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new StartupError(`cannot read the -lexicon file ${path}: ${(err as Error).message}`);
    }
    return Lexicon.fromText(text, path);
  }

  static fromText(text: string, source = 'the word list'): Lexicon {
    const words = new Set<string>();
    let skipped = 0;
    for (const raw of text.split(/\r?\n/)) {
      const line = raw.trim();
      if (!line || line.startsWith('#')) continue;
      if (/^[\p{L}\p{M}]+$/u.test(line)) words.add(line.normalize('NFC'));
      else skipped++;
    }
    if (words.size === 0) throw new StartupError(`-lexicon: ${source} holds no words (one word of letters per line)`);
    return new Lexicon([...words].sort(), skipped);
  }
}

interface TrieNode {
  end: boolean;
  children: Map<string, TrieNode>;
}

/**
 * `word ::= ...` as a trie: one rule per branching node, single-child chains
 * folded into literals, so the grammar grows with the branching, not the letters.
 */
function trieRules(words: string[]): string[] {
  const root: TrieNode = { end: false, children: new Map() };
  for (const w of words) {
    let n = root;
    for (const ch of w) {
      let next = n.children.get(ch);
      if (!next) n.children.set(ch, (next = { end: false, children: new Map() }));
      n = next;
    }
    n.end = true;
  }
  const rules: string[] = [];
  let count = 0;
  const ruleFor = (node: TrieNode, name: string): string => {
    const index = rules.length;
    rules.push('');
    const alts: string[] = [];
    for (const [ch, child] of [...node.children].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      let lit = ch;
      let n = child;
      while (!n.end && n.children.size === 1) {
        const [c2, n2] = n.children.entries().next().value as [string, TrieNode];
        lit += c2;
        n = n2;
      }
      if (n.children.size === 0) alts.push(literal(lit));
      else alts.push(`${literal(lit)} ${ruleFor(n, `w${++count}`)}${n.end ? '?' : ''}`);
    }
    rules[index] = `${name} ::= ${alts.join(' | ')}`;
    return name;
  };
  ruleFor(root, 'word');
  return rules;
}

function literal(s: string): string {
  return '"' + [...s].map((c) => (c === '"' || c === '\\' ? '\\' + c : c < ' ' ? hex(c) : c)).join('') + '"';
}

function classChar(c: string): string {
  // Words hold letters only, so only the escapes llama.cpp knows can ever apply.
  return c === ']' || c === '\\' ? '\\' + c : c < ' ' ? hex(c) : c;
}

function hex(c: string): string {
  return '\\x' + c.charCodeAt(0).toString(16).padStart(2, '0');
}
