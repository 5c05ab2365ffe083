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
  return withoutLatest(n.toLowerCase());
}

/** The name without its default tag (`x:latest` is `x`). */
export function withoutLatest(name: string): string {
  return name.endsWith(':latest') ? name.slice(0, -':latest'.length) : name;
}

export function sameModel(a: string, b: string): boolean {
  return normalizeModelName(a) === normalizeModelName(b);
}
