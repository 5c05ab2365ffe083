import { readFileSync } from 'node:fs';
import { writeFileAtomicAsync } from '../../../store/src/atomic-file';
import { Chunk } from './chunker';

/** The encoder an index's vectors came from: a vector is only comparable with one from the same weights. */
export interface IndexEncoder {
  name: string;
  /** sha256 of its weights file. */
  hash: string;
  dims: number;
}

/** One document in the index: what identified its contents, its chunks and one vector per chunk. */
export interface IndexedDocument {
  source: string;
  size: number;
  mtimeMs: number;
  sha256: string;
  chunks: Chunk[];
  /** chunks.length × dims, row by row. */
  vectors: Float32Array;
}

export interface StoredIndex {
  encoder: IndexEncoder;
  documents: IndexedDocument[];
}

const MAGIC = Buffer.from('SVCIDX1\n');
// 2: chunks weigh characters by script (chunker.ts); a version-1 file is rebuilt once.
const VERSION = 2;

/**
 * One file holds the whole index, written atomically (a crash leaves the old
 * index or the new one): MAGIC, the header's length (u32 LE), the header (JSON:
 * encoder, documents and their chunks), padding to 4 bytes, then every vector
 * as little-endian f32, documents in header order.
 */
export async function writeIndexFile(path: string, index: StoredIndex): Promise<void> {
  const header = Buffer.from(
    JSON.stringify({
      version: VERSION,
      encoder: index.encoder,
      documents: index.documents.map((d) => ({ source: d.source, size: d.size, mtimeMs: d.mtimeMs, sha256: d.sha256, chunks: d.chunks })),
    }),
  );
  const headEnd = MAGIC.length + 4 + header.length;
  const pad = (4 - (headEnd % 4)) % 4;
  const rows = index.documents.reduce((n, d) => n + d.vectors.length, 0);
  const buf = Buffer.alloc(headEnd + pad + rows * 4);
  MAGIC.copy(buf, 0);
  buf.writeUInt32LE(header.length, MAGIC.length);
  header.copy(buf, MAGIC.length + 4);
  let off = headEnd + pad;
  for (const d of index.documents) {
    // Little-endian f32, as the machines this runs on hold them: one copy per document.
    Buffer.from(d.vectors.buffer, d.vectors.byteOffset, d.vectors.byteLength).copy(buf, off);
    off += d.vectors.byteLength;
  }
  await writeFileAtomicAsync(path, buf);
}

/** The index a file holds; undefined when there is none. A damaged file throws (the caller rebuilds). */
export function readIndexFile(path: string): StoredIndex | undefined {
  let buf: Buffer;
  try {
    buf = readFileSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  if (buf.length < MAGIC.length + 4 || !buf.subarray(0, MAGIC.length).equals(MAGIC)) throw new Error('not an svc index file');
  const len = buf.readUInt32LE(MAGIC.length);
  const headEnd = MAGIC.length + 4 + len;
  if (headEnd > buf.length) throw new Error('index header runs past the end of the file');
  const head = JSON.parse(buf.subarray(MAGIC.length + 4, headEnd).toString('utf8')) as { version: number; encoder: IndexEncoder; documents: Array<Omit<IndexedDocument, 'vectors'>> };
  if (head.version !== VERSION) throw new Error(`index file version ${head.version}; this server reads ${VERSION}`);
  const dims = head.encoder?.dims;
  if (!Number.isInteger(dims) || dims < 1 || !Array.isArray(head.documents)) throw new Error('index header is malformed');
  let off = headEnd + ((4 - (headEnd % 4)) % 4);
  const rows = head.documents.reduce((n, d) => n + d.chunks.length, 0);
  if (buf.length !== off + rows * dims * 4) throw new Error(`index holds ${buf.length - off} bytes of vectors; its header describes ${rows * dims * 4}`);
  const documents = head.documents.map((d) => {
    const vectors = new Float32Array(d.chunks.length * dims);
    for (let i = 0; i < vectors.length; i++, off += 4) vectors[i] = buf.readFloatLE(off);
    return { ...d, vectors };
  });
  return { encoder: head.encoder, documents };
}
