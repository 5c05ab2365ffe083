import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
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
// 3: chunk texts moved out of the JSON header, which V8 could not make past ~512M characters.
// 2 (texts in the header) is still read; 1 (chunks not weighed by script) is rebuilt once.
const VERSION = 3;
const TEXTS_IN_HEADER = 2;
/** Bytes gathered into one write, and read at once: the file is never one buffer (readFileSync stops at 2 GiB). */
const PIECE = 1 << 20;

/**
 * One file holds the whole index, written atomically (a crash leaves the old index or the new
 * one): MAGIC, the header's length (u32 LE), the header (JSON: version, encoder, documents with
 * their chunks' [start, end]), then each chunk's text as its UTF-8 length (u32 LE) and bytes, in
 * header order, padding to 4 bytes, then every vector as little-endian f32, documents in header
 * order. Texts are written a piece at a time, never as one string.
 */
export async function writeIndexFile(path: string, index: StoredIndex): Promise<void> {
  await writeFileAtomicAsync(path, indexPieces(index));
}

function* indexPieces(index: StoredIndex): Generator<Buffer> {
  const header = Buffer.from(
    JSON.stringify({
      version: VERSION,
      encoder: index.encoder,
      documents: index.documents.map((d) => ({ source: d.source, size: d.size, mtimeMs: d.mtimeMs, sha256: d.sha256, chunks: d.chunks.map((c) => [c.start, c.end]) })),
    }),
  );
  const lead = Buffer.alloc(MAGIC.length + 4);
  MAGIC.copy(lead, 0);
  lead.writeUInt32LE(header.length, MAGIC.length);
  yield lead;
  yield header;
  let written = lead.length + header.length;
  let piece: Buffer[] = [];
  let size = 0;
  for (const d of index.documents) {
    for (const c of d.chunks) {
      // Chunk texts are whole characters (document-files decodes strictly, the chunker keeps surrogate pairs): UTF-8 holds them exactly.
      const text = Buffer.from(c.text, 'utf8');
      const len = Buffer.alloc(4);
      len.writeUInt32LE(text.length);
      piece.push(len, text);
      size += 4 + text.length;
      if (size >= PIECE) {
        yield Buffer.concat(piece);
        written += size;
        piece = [];
        size = 0;
      }
    }
  }
  written += size;
  piece.push(Buffer.alloc((4 - (written % 4)) % 4));
  yield Buffer.concat(piece);
  // Little-endian f32, as the machines this runs on hold them: each document's vectors as they are.
  for (const d of index.documents) yield Buffer.from(d.vectors.buffer, d.vectors.byteOffset, d.vectors.byteLength);
}

interface Header {
  version: number;
  encoder: IndexEncoder;
  documents: Array<Omit<IndexedDocument, 'vectors' | 'chunks'> & { chunks: unknown[] }>;
}

/** The index a file holds; undefined when there is none. A damaged file throws (the caller rebuilds). */
export function readIndexFile(path: string): StoredIndex | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    return readIndex(new FileReader(fd, fstatSync(fd).size));
  } finally {
    closeSync(fd);
  }
}

function readIndex(r: FileReader): StoredIndex {
  if (r.size < MAGIC.length + 4 || !r.take(MAGIC.length).equals(MAGIC)) throw new Error('not an svc index file');
  const len = r.take(4).readUInt32LE(0);
  if (r.at + len > r.size) throw new Error('index header runs past the end of the file');
  const head = JSON.parse(r.take(len).toString('utf8')) as Header;
  if (head.version !== VERSION && head.version !== TEXTS_IN_HEADER) throw new Error(`index file version ${head.version}; this server reads ${TEXTS_IN_HEADER} and ${VERSION}`);
  const dims = head.encoder?.dims;
  if (!Number.isInteger(dims) || dims < 1 || !Array.isArray(head.documents) || !head.documents.every((d) => Array.isArray(d?.chunks))) throw new Error('index header is malformed');
  const documents = head.documents.map((d) =>
    head.version === TEXTS_IN_HEADER
      ? // Its offsets left out a leading byte-order mark: mtime unknown, so the next refresh reads each document again (not embedding it).
        { ...d, mtimeMs: -1, chunks: d.chunks as Chunk[] }
      : { ...d, chunks: (d.chunks as Array<[number, number]>).map(([start, end]) => ({ start, end, text: r.text() })) },
  );
  r.take((4 - (r.at % 4)) % 4);
  const rows = documents.reduce((n, d) => n + d.chunks.length, 0);
  if (r.size - r.at !== rows * dims * 4) throw new Error(`index holds ${r.size - r.at} bytes of vectors; its header describes ${rows * dims * 4}`);
  return {
    encoder: head.encoder,
    documents: documents.map((d) => {
      const vectors = new Float32Array(d.chunks.length * dims);
      const bytes = r.take(vectors.length * 4);
      for (let i = 0; i < vectors.length; i++) vectors[i] = bytes.readFloatLE(i * 4);
      return { ...d, vectors };
    }),
  };
}

/** An open file read in order, a block at a time. A buffer taken is valid until the next take. */
class FileReader {
  private block = Buffer.alloc(0);
  /** The file position of block[0]. */
  private from = 0;
  /** The file position of the next byte taken. */
  at = 0;

  constructor(
    private readonly fd: number,
    readonly size: number,
  ) {}

  take(n: number): Buffer {
    if (this.at + n > this.size) throw new Error(`index file ends at ${this.size} bytes, inside what its header describes`);
    if (this.at - this.from + n > this.block.length) {
      this.block = Buffer.allocUnsafe(Math.max(n, Math.min(PIECE, this.size - this.at)));
      for (let got = 0; got < this.block.length; ) {
        const k = readSync(this.fd, this.block, got, this.block.length - got, this.at + got);
        if (k === 0) throw new Error('index file was cut while it was read');
        got += k;
      }
      this.from = this.at;
    }
    const i = this.at - this.from;
    this.at += n;
    return this.block.subarray(i, i + n);
  }

  /** One chunk text: its UTF-8 length (u32 LE), then its bytes. */
  text(): string {
    const len = this.take(4).readUInt32LE(0);
    return this.take(len).toString('utf8');
  }
}
