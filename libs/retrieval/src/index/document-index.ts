import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { Chunk, chunkText } from './chunker';
import { readDocument, scanDocuments } from './document-files';
import { IndexedDocument, IndexEncoder, readIndexFile, writeIndexFile } from './index-file';
import { DocumentLabels } from './labels';
import { sweepTempFiles } from '../../../store/src/atomic-file';

/** What the index needs of an encoder: which weights it is, and vectors for texts. */
export interface IndexEmbedder {
  identity(): Promise<IndexEncoder>;
  /** Unit-length vectors; texts longer than the encoder reads are cut. */
  embed(texts: string[]): Promise<Float32Array[]>;
}

export interface Hit {
  source: string;
  chunk: Chunk;
  labels: string[];
  /** Cosine similarity (the vectors are unit length). */
  score: number;
}

/** svc's own files inside the index folder (hidden, so the scan skips them). */
export const INDEX_FILE = join('.svc-index', 'index.bin');

/** Chunks embedded per call: the encoder batches them itself, this bounds one call's memory. */
const EMBED_BATCH = 256;

type Entry = IndexedDocument & { labels: string[] };

/**
 * The documents of one folder, chunked and embedded, kept in memory and in one
 * index file. refresh() brings it up to date with the folder: a document whose
 * size and mtime did not change is not read, one whose contents did not change
 * (same sha256) is not embedded again, and every vector is recomputed when the
 * encoder's weights change. Labels are read afresh each time (they cost nothing).
 */
export class DocumentIndex {
  private readonly docs = new Map<string, Entry>();
  private encoder?: IndexEncoder;

  constructor(
    private readonly dir: string,
    private readonly warn: (msg: string) => void,
  ) {}

  get model(): string | undefined {
    return this.encoder?.name;
  }

  get documentCount(): number {
    return this.docs.size;
  }

  get chunkCount(): number {
    let n = 0;
    for (const d of this.docs.values()) n += d.chunks.length;
    return n;
  }

  /** What the index file holds, if it can be read (a damaged one is rebuilt, with a warning). */
  load(): void {
    const swept = sweepTempFiles(join(this.dir, INDEX_FILE));
    if (swept > 0) this.warn(`index: removed ${swept} unfinished index file(s) an earlier process left when it was stopped mid-write`);
    try {
      const stored = readIndexFile(join(this.dir, INDEX_FILE));
      if (!stored) return;
      this.encoder = stored.encoder;
      // Unlabelled until the first refresh reads labels.json, which comes before any search.
      for (const d of stored.documents) this.docs.set(d.source, { ...d, labels: [] });
    } catch (err) {
      this.warn(`index: ${join(this.dir, INDEX_FILE)} cannot be read (${(err as Error).message}); it is built again`);
    }
  }

  async refresh(embedder: IndexEmbedder): Promise<void> {
    // First: a malformed labels file stops the refresh before anything is served with wrong labels.
    const labels = DocumentLabels.read(this.dir);
    // Labels first, on every document, before anything is awaited: a search running beside this
    // refresh must never see a document without the labels it has now.
    for (const d of this.docs.values()) d.labels = labels.of(d.source);
    const enc = await embedder.identity();
    let changed = false;
    if (!this.encoder || this.encoder.hash !== enc.hash || this.encoder.dims !== enc.dims) {
      if (this.docs.size > 0) this.warn(`index: built with ${this.encoder?.name ?? 'another encoder'}; every document is embedded again with ${enc.name}`);
      this.docs.clear();
      this.encoder = enc;
      changed = true;
    }
    const seen = new Set<string>();
    try {
      for (const st of await scanDocuments(this.dir, this.warn)) {
        seen.add(st.source);
        const old = this.docs.get(st.source);
        if (old && old.size === st.size && old.mtimeMs === st.mtimeMs) continue;
        const doc = await readDocument(this.dir, st.source, this.warn);
        if (!doc) {
          changed = this.docs.delete(st.source) || changed;
          continue;
        }
        const sha256 = createHash('sha256').update(doc.bytes).digest('hex');
        changed = true;
        const chunks = chunkText(doc.text);
        // Same contents, same chunk texts: the vectors hold; the offsets are taken afresh (an
        // older index counted a byte-order mark out of them).
        if (old && old.sha256 === sha256 && sameTexts(old.chunks, chunks)) {
          Object.assign(old, { size: st.size, mtimeMs: st.mtimeMs, chunks });
          continue;
        }
        const vectors = new Float32Array(chunks.length * enc.dims);
        for (let i = 0; i < chunks.length; i += EMBED_BATCH) {
          const batch = await embedder.embed(chunks.slice(i, i + EMBED_BATCH).map((c) => c.text));
          batch.forEach((v, k) => vectors.set(v, (i + k) * enc.dims));
        }
        this.docs.set(st.source, { source: st.source, size: st.size, mtimeMs: st.mtimeMs, sha256, chunks, vectors, labels: labels.of(st.source) });
      }
      for (const source of [...this.docs.keys()]) {
        if (!seen.has(source)) changed = this.docs.delete(source) || changed;
      }
    } finally {
      // What was embedded before a failure is kept: the next refresh goes on from there.
      if (changed) await this.persist();
    }
  }

  /** The n chunks most similar to `query` among the documents `visible` lets through, best first. */
  search(query: Float32Array, visible: (labels: string[]) => boolean, n: number): Hit[] {
    const dims = this.encoder?.dims ?? 0;
    const best: Hit[] = [];
    for (const d of this.docs.values()) {
      if (!visible(d.labels)) continue;
      for (let c = 0; c < d.chunks.length; c++) {
        let s = 0;
        const base = c * dims;
        for (let k = 0; k < dims; k++) s += query[k] * d.vectors[base + k];
        if (best.length < n || s > best[best.length - 1].score) {
          best.push({ source: d.source, chunk: d.chunks[c], labels: d.labels, score: s });
          best.sort((a, b) => b.score - a.score);
          if (best.length > n) best.pop();
        }
      }
    }
    return best;
  }

  private async persist(): Promise<void> {
    if (!this.encoder) return;
    const documents = [...this.docs.values()].sort((a, b) => (a.source < b.source ? -1 : 1));
    try {
      await writeIndexFile(join(this.dir, INDEX_FILE), { encoder: this.encoder, documents });
    } catch (err) {
      // The index still answers from memory; it is written again after the next change.
      this.warn(`index: cannot write ${join(this.dir, INDEX_FILE)}: ${(err as Error).message}`);
    }
  }
}

function sameTexts(a: Chunk[], b: Chunk[]): boolean {
  return a.length === b.length && a.every((c, i) => c.text === b[i].text);
}
