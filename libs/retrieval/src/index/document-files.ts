import { lstat, readdir, readFile } from 'node:fs/promises';
import { extname, join } from 'node:path';

/** A document file as a scan sees it: its path under the index folder (with '/'), size and mtime. */
export interface DocumentStat {
  source: string;
  size: number;
  mtimeMs: number;
}

/** Text formats the index reads; anything else in the folder is left alone. */
const TEXT_EXTENSIONS = new Set(['.txt', '.text', '.md', '.markdown', '.rst', '.adoc', '.org', '.tex', '.csv', '.tsv', '.json', '.jsonl', '.yaml', '.yml', '.xml', '.html', '.htm', '.log']);

/** Larger files are skipped (with a warning): one document should not hold the index up for minutes. */
export const MAX_DOCUMENT_BYTES = 32 * 1024 * 1024;

/** The file beside the documents that gives them labels (never indexed itself). */
export const LABELS_FILE = 'labels.json';

/**
 * Every indexable document under `dir`, sorted by path. Hidden entries (a
 * leading '.', svc's own `.svc-index` among them) and symbolic links are
 * skipped: a link could make the index serve a file from outside the folder.
 */
export async function scanDocuments(dir: string, warn: (msg: string) => void): Promise<DocumentStat[]> {
  const out: DocumentStat[] = [];
  // Off the event loop: a large folder's walk and reads would stall every request meanwhile.
  const walk = async (rel: string) => {
    let names: string[];
    try {
      names = await readdir(join(dir, rel));
    } catch (err) {
      // The folder itself missing is an empty index; a subfolder that vanished mid-scan is skipped.
      if (rel !== '' || (err as NodeJS.ErrnoException).code !== 'ENOENT') warn(`index: cannot read ${rel || dir}: ${(err as Error).message}`);
      return;
    }
    for (const name of names.sort()) {
      if (name.startsWith('.')) continue;
      const source = rel ? `${rel}/${name}` : name;
      if (source === LABELS_FILE) continue;
      let st;
      try {
        st = await lstat(join(dir, source));
      } catch {
        continue;
      }
      if (st.isDirectory()) await walk(source);
      else if (st.isFile() && TEXT_EXTENSIONS.has(extname(name).toLowerCase())) {
        if (st.size > MAX_DOCUMENT_BYTES) warn(`index: ${source} is ${st.size} bytes; documents over ${MAX_DOCUMENT_BYTES} are skipped`);
        else out.push({ source, size: st.size, mtimeMs: st.mtimeMs });
      }
    }
  };
  await walk('');
  return out;
}

/** A document's text, or undefined (with a warning) when it is not UTF-8 text. */
export async function readDocument(dir: string, source: string, warn: (msg: string) => void): Promise<{ text: string; bytes: Buffer } | undefined> {
  let bytes: Buffer;
  try {
    bytes = await readFile(join(dir, source));
  } catch (err) {
    warn(`index: cannot read ${source}: ${(err as Error).message}`);
    return undefined;
  }
  try {
    // A byte-order mark is kept: offsets index the document as readFileSync(p, 'utf8') and Python's
    // open(p, encoding='utf-8') read it, U+FEFF at 0. The chunker trims it off (\s holds it), so it is never embedded.
    const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
    if (text.includes('\0')) throw new Error('binary');
    return { text, bytes };
  } catch {
    warn(`index: ${source} is not UTF-8 text; skipped`);
    return undefined;
  }
}
