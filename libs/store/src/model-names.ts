/**
 * Loose model-name matching: case-insensitive, and a name without a tag finds the
 * same name with `:latest` (and the other way round).
 */
export function normalizeModelName(name: string): string {
  const n = name.trim().toLowerCase();
  return n.endsWith(':latest') ? n.slice(0, -':latest'.length) : n;
}

export function sameModel(a: string, b: string): boolean {
  return normalizeModelName(a) === normalizeModelName(b);
}
