import { FastifyRequest } from 'fastify';

/**
 * The order a body's keys were written in, where JavaScript objects lose it: keys that are
 * integers ("2", "1") are always listed first and ascending. Read from the body's text, which
 * the JSON parser keeps per request (rememberJsonText) only as long as the request lives.
 */
const TEXTS = new WeakMap<object, string>();

export function rememberJsonText(req: FastifyRequest, text: string): void {
  TEXTS.set(req, text);
}

/**
 * In one pass over the body: the keys of top-level member `member` in the body's order (a
 * repeated key where it first stood, as JavaScript keeps it; of a repeated member, the last),
 * and for each of its entries, the keys of that entry's member `inner` (a decision's questions
 * and each question's criteria). Undefined when the body was not JSON text this parser read or
 * that member is not an object. Reading each entry's order apart read a 30 MB body 64 times.
 */
export function nestedKeyOrders(req: FastifyRequest, member: string, inner: string): { keys: string[]; inner: Map<string, string[]> } | undefined {
  const text = TEXTS.get(req);
  if (text === undefined) return undefined;
  const top = skipWs(text, 0);
  if (text[top] !== '{') return undefined;
  let at: number | undefined;
  forEachMember(text, top, (key, valueAt) => {
    if (key === member) at = valueAt;
  });
  if (at === undefined || text[at] !== '{') return undefined;
  const innerKeys = new Map<string, string[]>();
  forEachMember(text, at, (key, valueAt) => {
    if (text[valueAt] !== '{') return;
    forEachMember(text, valueAt, (k, v) => {
      if (k === inner) {
        if (text[v] === '{') innerKeys.set(key, keysOf(text, v));
        else innerKeys.delete(key);
      }
    });
  });
  return { keys: keysOf(text, at), inner: innerKeys };
}

function keysOf(text: string, at: number): string[] {
  const keys: string[] = [];
  forEachMember(text, at, (key) => {
    if (!keys.includes(key)) keys.push(key);
  });
  return keys;
}

/** Calls fn(key, valueOffset) for each member of the object at `at` (valid JSON: the parser accepted it). */
function forEachMember(text: string, at: number, fn: (key: string, valueAt: number) => void): void {
  let i = skipWs(text, at + 1);
  while (text[i] !== '}') {
    const keyEnd = valueEnd(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    const valueAt = skipWs(text, skipWs(text, keyEnd) + 1);
    fn(key, valueAt);
    i = skipWs(text, valueEnd(text, valueAt));
    if (text[i] === ',') i = skipWs(text, i + 1);
  }
}

/** Where the value starting at `i` ends: past its closing quote or bracket, or its last character. */
function valueEnd(text: string, i: number): number {
  const c = text[i];
  if (c === '"') {
    for (let j = i + 1; ; j++) {
      if (text[j] === '\\') j++;
      else if (text[j] === '"') return j + 1;
    }
  }
  if (c === '{' || c === '[') {
    let depth = 0;
    for (let j = i; ; j++) {
      const d = text[j];
      if (d === '"') j = valueEnd(text, j) - 1;
      else if (d === '{' || d === '[') depth++;
      else if ((d === '}' || d === ']') && --depth === 0) return j + 1;
    }
  }
  let j = i;
  while (j < text.length && !',}] \t\n\r'.includes(text[j])) j++;
  return j;
}

function skipWs(text: string, i: number): number {
  while (i < text.length && ' \t\n\r'.includes(text[i])) i++;
  return i;
}
