import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Lays out a local-runner (Ollama) store on disk: blobs/sha256-<hex> and manifests/<host>/<ns>/<model>/<tag>. */
export function writeOllamaModel(root: string, name: string, layers: Array<{ mediaType: string; data: Buffer }>): void {
  const [path, tag = 'latest'] = name.split(':');
  const parts = path.split('/');
  while (parts.length < 3) parts.unshift(parts.length === 1 ? 'library' : 'registry.ollama.ai');
  mkdirSync(join(root, 'blobs'), { recursive: true });
  const out = layers.map((l) => {
    const hex = sha(l.data);
    writeFileSync(join(root, 'blobs', `sha256-${hex}`), l.data);
    return { mediaType: l.mediaType, digest: `sha256:${hex}`, size: l.data.length };
  });
  const dir = join(root, 'manifests', ...parts);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, tag), JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.docker.distribution.manifest.v2+json', layers: out }));
}

/** One hash over every path, size, mode and content under root: proves a tree was not touched. */
export function hashTree(root: string): string {
  const h = createHash('sha256');
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = join(d, e.name);
      const st = statSync(p);
      h.update(`${p}\0${st.mode}\0${st.mtimeMs}\0`);
      if (e.isDirectory()) walk(p);
      else h.update(readFileSync(p));
    }
  };
  walk(root);
  return h.digest('hex');
}
