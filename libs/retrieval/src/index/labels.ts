import { existsSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { LABELS_FILE } from './document-files';

/**
 * Which labels each document carries, from `labels.json` beside the documents:
 * an object whose keys are a document's path, a folder ("hr/" or "hr") or '*'
 * (every document), each mapped to an array of labels. A document carries the
 * labels of every key that names it. No file: no document has labels.
 */
export class DocumentLabels {
  private constructor(private readonly rules: Array<[string, string[]]>) {}

  static none(): DocumentLabels {
    return new DocumentLabels([]);
  }

  /** Reads the folder's labels.json; a malformed one throws (the index then refuses to answer rather than show too much). */
  static read(dir: string): DocumentLabels {
    let raw: string;
    try {
      raw = readFileSync(join(dir, LABELS_FILE), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return DocumentLabels.none();
      throw new Error(`index ${LABELS_FILE}: ${(err as Error).message}`);
    }
    let v: unknown;
    try {
      v = JSON.parse(raw);
    } catch (err) {
      throw new Error(`index ${LABELS_FILE} is not JSON: ${(err as Error).message}`);
    }
    return DocumentLabels.of(v, (key) => existsSync(join(dir, key)));
  }

  /** `exists`: whether a key names a real path (a pattern's characters are fine in a real file name). */
  static of(v: unknown, exists: (key: string) => boolean = () => false): DocumentLabels {
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Error(`index ${LABELS_FILE} must be an object mapping paths or folders to arrays of labels`);
    const rules: Array<[string, string[]]> = [];
    for (const [key, labels] of Object.entries(v as Record<string, unknown>)) {
      if (!Array.isArray(labels) || !labels.every((l) => typeof l === 'string' && l.trim() !== '')) {
        throw new Error(`index ${LABELS_FILE}: ${JSON.stringify(key)} must map to an array of labels (non-empty strings)`);
      }
      const path = key === '*' ? '*' : keyPath(key);
      if (path === undefined) throw new Error(`index ${LABELS_FILE}: ${JSON.stringify(key)} names a path outside the folder`);
      // A pattern would read as a path naming nothing, and label nothing: refused rather than open.
      if (key !== '*' && /[*?[\]{}]/.test(key) && !exists(path)) throw new Error(`index ${LABELS_FILE}: ${JSON.stringify(key)} is a pattern; keys are a document's path, a folder or "*"`);
      rules.push([path, labels as string[]]);
    }
    return new DocumentLabels(rules);
  }

  /** The labels of a document, sorted, each once. */
  of(source: string): string[] {
    const out = new Set<string>();
    for (const [key, labels] of this.rules) {
      // A folder may be written with or without its trailing '/'.
      const folder = key.endsWith('/') ? key : `${key}/`;
      if (key === '*' || key === source || source.startsWith(folder)) for (const l of labels) out.add(l);
    }
    return [...out].sort();
  }
}

/**
 * A key as the document paths are written ("hr/pay.txt"), however it was spelt: "hr/.",
 * "hr//", "bulk/../hr", "./hr/" and "hr/pay.txt/" all name what "hr" or "hr/pay.txt" names (compared
 * as written, they labelled nothing, and the documents went unprotected). "." or "/" is the whole
 * folder, as "*". undefined for a key that leaves the folder.
 */
function keyPath(key: string): string | undefined {
  const p = posix.normalize(key).replace(/^\/+/, '').replace(/\/+$/, '');
  if (p === '' || p === '.') return '*';
  if (p === '..' || p.startsWith('../')) return undefined;
  return p;
}
