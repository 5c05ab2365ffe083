import { displayName, parseModelRef } from './model-ref';

/**
 * Loose model-name matching: case-insensitive, a name without a tag finds the same name with
 * `:latest` (and the other way round), and a fully qualified name (`library/x`,
 * `registry.ollama.ai/library/x:latest`) finds the short one it is listed as.
 */
export function normalizeModelName(name: string): string {
  let n = name.trim().toLowerCase();
  try {
    n = displayName(parseModelRef(n));
  } catch {
    // Not a store name (a file's name, an adapter's <base>+<name>): compared as written.
  }
  n = n.toLowerCase();
  return n.endsWith(':latest') ? n.slice(0, -':latest'.length) : n;
}

export function sameModel(a: string, b: string): boolean {
  return normalizeModelName(a) === normalizeModelName(b);
}
