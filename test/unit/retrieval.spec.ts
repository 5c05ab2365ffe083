import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { chunkText } from '../../libs/retrieval/src/index/chunker';
import { DocumentIndex, IndexEmbedder } from '../../libs/retrieval/src/index/document-index';
import { readIndexFile, StoredIndex, writeIndexFile } from '../../libs/retrieval/src/index/index-file';
import { DocumentLabels } from '../../libs/retrieval/src/index/labels';

describe('chunker', () => {
  const check = (text: string, max: number) => {
    const chunks = chunkText(text, max);
    for (const c of chunks) {
      expect(text.slice(c.start, c.end)).toBe(c.text);
      expect(c.text.length).toBeLessThanOrEqual(max);
      expect(c.text).toBe(c.text.trim());
    }
    // In order, not overlapping, and only whitespace left out.
    for (let i = 1; i < chunks.length; i++) expect(chunks[i].start).toBeGreaterThanOrEqual(chunks[i - 1].end);
    expect(chunks.map((c) => c.text).join('').replace(/\s/g, '')).toBe(text.replace(/\s/g, ''));
    return chunks;
  };

  it('packs paragraphs together up to the limit and cuts between them', () => {
    const text = 'One two.\n\nThree four five.\n\nSix.';
    expect(check(text, 1000).map((c) => c.text)).toEqual([text]);
    expect(check(text, 20).map((c) => c.text)).toEqual(['One two.', 'Three four five.', 'Six.']);
  });

  it('cuts a long paragraph at sentences, then words, then anywhere', () => {
    const sentences = 'The cat sat. The dog ran off. A bird sang loudly.';
    expect(check(sentences, 30).map((c) => c.text)).toEqual(['The cat sat. The dog ran off.', 'A bird sang loudly.']);
    expect(check('alpha beta gamma delta', 11).map((c) => c.text)).toEqual(['alpha beta', 'gamma delta']);
    expect(check('x'.repeat(25), 10).map((c) => c.text)).toEqual(['x'.repeat(10), 'x'.repeat(10), 'x'.repeat(5)]);
  });

  it('never splits a surrogate pair, and keeps UTF-16 offsets', () => {
    const text = '😀'.repeat(7);
    const chunks = check(text, 5);
    for (const c of chunks) expect(c.text).toBe([...c.text].join(''));
    expect(chunks.every((c) => !/[\ud800-\udbff]$/.test(c.text))).toBe(true);
    expect(check('   \n\n  ', 10)).toEqual([]);
  });

  it('weighs characters by script: a Han chunk holds a quarter as many (each is about a token; the encoder cut the rest)', () => {
    const han = '数据'.repeat(500);
    const chunks = check(han, 1000);
    expect(chunks.map((c) => c.text.length)).toEqual([250, 250, 250, 250]);
    // Cyrillic counts two, ASCII one.
    expect(check('д'.repeat(600), 1000).map((c) => c.text.length)).toEqual([500, 100]);
    expect(check('a'.repeat(1000), 1000).map((c) => c.text.length)).toEqual([1000]);
  });

  it('cuts between paragraphs of a CRLF text as of an LF one', () => {
    // Paragraphs of six lines each: without the paragraph break, lines of both were packed into one chunk.
    const para = (c: string, nl: string) => Array.from({ length: 6 }, () => c.repeat(89) + '.').join(nl);
    const lf = check(`${para('a', '\n')}\n\n${para('b', '\n')}`, 1000).map((c) => c.text[0] + c.text.at(-2));
    const crlf = check(`${para('a', '\r\n')}\r\n\r\n${para('b', '\r\n')}`, 1000).map((c) => c.text[0] + c.text.at(-2));
    expect(lf).toEqual(['aa', 'bb']);
    expect(crlf).toEqual(lf);
  });
});

describe('document labels', () => {
  it('gives a document the labels of its path, its folders (with or without the slash) and *', () => {
    const l = DocumentLabels.of({ 'hr/': ['hr'], 'hr/pay/q3.md': ['secret'], '*': ['all'], './other.txt': ['x'], finance: ['money'] });
    expect(l.of('finance/q1.txt')).toEqual(['all', 'money']);
    expect(l.of('finance.txt')).toEqual(['all']);
    expect(l.of('hr/pay/q3.md')).toEqual(['all', 'hr', 'secret']);
    expect(l.of('hr/people.txt')).toEqual(['all', 'hr']);
    expect(l.of('hrx/a.txt')).toEqual(['all']);
    expect(l.of('other.txt')).toEqual(['all', 'x']);
  });

  it('reads a key however its path is spelt (compared as written, these labelled nothing)', () => {
    for (const key of ['hr/.', 'hr//', 'bulk/../hr', './hr/', '/hr', 'hr/pay.txt/', './hr/./pay.txt']) {
      expect([key, DocumentLabels.of({ [key]: ['hr'] }).of('hr/pay.txt')]).toEqual([key, ['hr']]);
    }
    expect(DocumentLabels.of({ '.': ['all'] }).of('any/file.txt')).toEqual(['all']);
    expect(DocumentLabels.of({ 'hr/.': ['hr'] }).of('hrx/a.txt')).toEqual([]);
    expect(() => DocumentLabels.of({ '../hr': ['hr'] })).toThrow('"../hr" names a path outside the folder');
  });

  it('refuses a malformed file instead of reading it leniently', () => {
    expect(() => DocumentLabels.of([])).toThrow('must be an object mapping paths or folders to arrays of labels');
    expect(() => DocumentLabels.of({ a: 'hr' })).toThrow('"a" must map to an array of labels');
    expect(() => DocumentLabels.of({ a: [''] })).toThrow('"a" must map to an array of labels');
    expect(() => DocumentLabels.of({ 'hr/*.md': ['hr'] })).toThrow('"hr/*.md" is a pattern; keys are a document\'s path, a folder or "*"');
    // A real file whose name holds such characters is a path, not a pattern.
    expect(DocumentLabels.of({ 'reports/Q3 [draft].md': ['x'] }, (k) => k === 'reports/Q3 [draft].md').of('reports/Q3 [draft].md')).toEqual(['x']);
    expect(DocumentLabels.of({ './': ['all'] }).of('any/file.txt')).toEqual(['all']);
    const dir = mkdtempSync(join(tmpdir(), 'svc-labels-'));
    expect(DocumentLabels.read(dir).of('a')).toEqual([]);
    writeFileSync(join(dir, 'labels.json'), '{');
    expect(() => DocumentLabels.read(dir)).toThrow(/^index labels.json is not JSON/);
  });
});

/** An index file in the previous layout (version 2): chunk texts inside the JSON header. */
function versionTwo(index: StoredIndex): Buffer {
  const header = Buffer.from(JSON.stringify({ version: 2, encoder: index.encoder, documents: index.documents.map((d) => ({ source: d.source, size: d.size, mtimeMs: d.mtimeMs, sha256: d.sha256, chunks: d.chunks })) }));
  const headEnd = 12 + header.length;
  const lead = Buffer.alloc(12);
  lead.write('SVCIDX1\n', 'latin1');
  lead.writeUInt32LE(header.length, 8);
  const vectors = index.documents.map((d) => Buffer.from(d.vectors.buffer, d.vectors.byteOffset, d.vectors.byteLength));
  return Buffer.concat([lead, header, Buffer.alloc((4 - (headEnd % 4)) % 4), ...vectors]);
}

describe('index file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-indexfile-'));
  const path = join(dir, 'index.bin');
  const index = {
    encoder: { name: 'enc', hash: 'abc', dims: 3 },
    documents: [
      { source: 'a.txt', size: 5, mtimeMs: 1.5, sha256: 'h1', chunks: [{ start: 0, end: 5, text: 'hello' }], vectors: Float32Array.from([0.25, -0.5, 1]) },
      { source: 'b/c.md', size: 9, mtimeMs: 2, sha256: 'h2', chunks: [{ start: 0, end: 2, text: 'hi' }, { start: 3, end: 9, text: 'there!' }], vectors: Float32Array.from([1, 2, 3, 4, 5, 6]) },
    ],
  };

  it('reads back what it wrote, vectors included', async () => {
    await writeIndexFile(path, index);
    expect(readIndexFile(path)).toEqual(index);
    expect(readIndexFile(join(dir, 'none.bin'))).toBeUndefined();
  });

  it('refuses damage: a foreign file, a cut one, extra bytes', async () => {
    await writeIndexFile(path, index);
    const good = readFileSync(path);
    writeFileSync(path, 'hello');
    expect(() => readIndexFile(path)).toThrow('not an svc index file');
    writeFileSync(path, good.subarray(0, good.length - 4));
    expect(() => readIndexFile(path)).toThrow(/bytes of vectors; its header describes/);
    writeFileSync(path, Buffer.concat([good, Buffer.alloc(4)]));
    expect(() => readIndexFile(path)).toThrow(/bytes of vectors; its header describes/);
    // Cut inside the chunk texts: the first text's length is there, its bytes are not.
    writeFileSync(path, good.subarray(0, 12 + good.readUInt32LE(8) + 6));
    expect(() => readIndexFile(path)).toThrow(/^index file ends at \d+ bytes, inside what its header describes$/);
  });

  it('reads back texts exactly: unicode, empty, longer than a write piece, and a document without chunks', async () => {
    const texts = ['', 'héllo wörld', '😀 数据 д\r\n\t"quoted" \\ back', '', 'x'.repeat(3 << 20), 'ü'.repeat(700_000)];
    const odd = {
      encoder: { name: 'enc', hash: 'abc', dims: 2 },
      documents: [
        { source: 'empty.txt', size: 0, mtimeMs: 0, sha256: 'h0', chunks: [], vectors: new Float32Array(0) },
        { source: 'ünï/😀.md', size: 1, mtimeMs: 3, sha256: 'h3', chunks: texts.map((text, i) => ({ start: i, end: i + text.length, text })), vectors: Float32Array.from(texts.flatMap((_, i) => [i, -i / 3])) },
      ],
    };
    await writeIndexFile(path, odd);
    expect(readIndexFile(path)).toEqual(odd);
  });

  it('keeps chunk texts out of the JSON header: V8 cannot make a string past ~512M characters, so large indexes could not be saved', async () => {
    const big = { ...index, documents: [{ ...index.documents[0], chunks: [{ start: 0, end: 2_000_000, text: 'y'.repeat(2_000_000) }] }] };
    await writeIndexFile(path, big);
    // The header's length (u32 after the 8-byte magic): the document's name and offsets, no text.
    expect(readFileSync(path).readUInt32LE(8)).toBeLessThan(1000);
    expect(readIndexFile(path)).toEqual(big);
  });

  it('still reads a version-2 file, whose texts are in the header; its documents are to be read again (mtime unknown)', () => {
    writeFileSync(path, versionTwo(index));
    expect(readIndexFile(path)).toEqual({ ...index, documents: index.documents.map((d) => ({ ...d, mtimeMs: -1 })) });
    writeFileSync(path, Buffer.from(versionTwo(index).toString('latin1').replace('"version":2', '"version":1'), 'latin1'));
    expect(() => readIndexFile(path)).toThrow('index file version 1; this server reads 2 and 3');
  });

  // Over V8's string limit for real: about 540 MB of text written and read back (a few GB of memory, tens of seconds).
  (process.env.SVC_TEST_BIG_INDEX ? it : it.skip)('writes and reads an index whose texts pass 512M characters (SVC_TEST_BIG_INDEX=1)', async () => {
    const text = 'z'.repeat(1000);
    const n = 540_000;
    const chunks = Array.from({ length: n }, (_, i) => ({ start: i * 1000, end: (i + 1) * 1000, text }));
    const huge = join(mkdtempSync(join(tmpdir(), 'svc-bigindex-')), 'index.bin');
    try {
      await writeIndexFile(huge, { encoder: { name: 'enc', hash: 'abc', dims: 1 }, documents: [{ source: 'huge.txt', size: n * 1000, mtimeMs: 1, sha256: 'h', chunks, vectors: new Float32Array(n) }] });
      const back = readIndexFile(huge)!;
      expect(back.documents[0].chunks).toHaveLength(n);
      expect(back.documents[0].chunks[n - 1]).toEqual(chunks[n - 1]);
    } finally {
      rmSync(dirname(huge), { recursive: true, force: true });
    }
  }, 600_000);
});

describe('document index refresh', () => {
  /** A stand-in encoder counting what it embeds: each text's vector is its length and vowel count, normalized. */
  function counting(hash = 'w1'): IndexEmbedder & { texts: string[] } {
    const texts: string[] = [];
    return {
      texts,
      identity: async () => ({ name: `enc-${hash}`, hash, dims: 2 }),
      embed: async (batch) => {
        texts.push(...batch);
        return batch.map((t) => {
          const v = [t.length, (t.match(/[aeiou]/g) ?? []).length];
          const n = Math.hypot(v[0], v[1]);
          return Float32Array.from(v.map((x) => x / n));
        });
      },
    };
  }

  it('removes the unfinished index files a killed process left, not one another process is writing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-docs-'));
    mkdirSync(join(dir, '.svc-index'));
    const stale = join(dir, '.svc-index', '.tmp-index.bin-0a1b2c');
    const fresh = join(dir, '.svc-index', '.tmp-index.bin-3d4e5f');
    writeFileSync(stale, 'x'.repeat(1000));
    writeFileSync(fresh, 'y');
    utimesSync(stale, new Date(Date.now() - 3600_000), new Date(Date.now() - 3600_000));
    const warn = jest.fn();
    new DocumentIndex(dir, warn).load();
    expect([existsSync(stale), existsSync(fresh)]).toEqual([false, true]);
    expect(warn).toHaveBeenCalledWith(expect.stringMatching(/removed 1 unfinished index file/));
  });

  it('embeds only new or changed contents, and everything again for other weights', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-docs-'));
    writeFileSync(join(dir, 'a.txt'), 'aaaa');
    writeFileSync(join(dir, 'b.md'), 'bcd');
    const warn = jest.fn();
    const idx = new DocumentIndex(dir, warn);
    const e = counting();
    await idx.refresh(e);
    expect(e.texts.sort()).toEqual(['aaaa', 'bcd']);
    // Touched with the same contents: read again (mtime), not embedded again (sha256).
    writeFileSync(join(dir, 'a.txt'), 'aaaa');
    writeFileSync(join(dir, 'b.md'), 'changed');
    await idx.refresh(e);
    expect(e.texts.sort()).toEqual(['aaaa', 'bcd', 'changed']);
    // A fresh process reads the index file: nothing to embed.
    const again = new DocumentIndex(dir, warn);
    again.load();
    const e2 = counting();
    await again.refresh(e2);
    expect(e2.texts).toEqual([]);
    expect(again.search(Float32Array.from([1, 0]), () => true, 5).map((h) => h.chunk.text).sort()).toEqual(['aaaa', 'changed']);
    const other = counting('w2');
    await again.refresh(other);
    expect(other.texts.sort()).toEqual(['aaaa', 'changed']);
    expect(warn).toHaveBeenCalledWith(expect.stringMatching(/built with enc-w1; every document is embedded again with enc-w2/));
  });

  it('never shows a document without its labels while a refresh runs beside a search', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-docs-'));
    mkdirSync(join(dir, 'secret'));
    writeFileSync(join(dir, 'secret', 'a.txt'), 'aaaa');
    writeFileSync(join(dir, 'secret', 'b.txt'), 'bbbb');
    writeFileSync(join(dir, 'labels.json'), JSON.stringify({ 'secret/': ['s'] }));
    const idx = new DocumentIndex(dir, () => undefined);
    const inner = counting();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let calls = 0;
    const slow: IndexEmbedder = { identity: inner.identity, embed: async (t) => (++calls === 2 ? gate.then(() => inner.embed(t)) : inner.embed(t)) };
    const refreshing = idx.refresh(slow);
    while (calls < 2) await new Promise((r) => setImmediate(r));
    // a.txt is in, b.txt is being embedded: a caller without "s" sees nothing of either.
    expect(idx.search(Float32Array.from([1, 0]), (labels) => labels.length === 0, 10)).toEqual([]);
    expect(idx.search(Float32Array.from([1, 0]), () => true, 10).map((h) => [h.source, h.labels])).toEqual([['secret/a.txt', ['s']]]);
    release();
    await refreshing;
    // Labels changed: they hold on every document from the start of the next refresh.
    writeFileSync(join(dir, 'labels.json'), JSON.stringify({ 'secret/': ['t'] }));
    await idx.refresh(inner);
    expect(idx.search(Float32Array.from([1, 0]), () => true, 10).map((h) => h.labels)).toEqual([['t'], ['t']]);
  });

  it('counts a byte-order mark in offsets, as readFileSync(p, "utf8") and Python\'s open() read the document, and never embeds it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-docs-'));
    writeFileSync(join(dir, 'bom.txt'), '\ufeffFirst paragraph here.\n\nSecond one.');
    const e = counting();
    const idx = new DocumentIndex(dir, () => undefined);
    await idx.refresh(e);
    expect(e.texts).toEqual(['First paragraph here.\n\nSecond one.']);
    const file = readFileSync(join(dir, 'bom.txt'), 'utf8');
    const [hit] = idx.search(Float32Array.from([1, 0]), () => true, 5);
    expect([hit.chunk.start, hit.chunk.end, file.slice(hit.chunk.start, hit.chunk.end)]).toEqual([1, file.length, hit.chunk.text]);
  });

  it('takes an older index\'s offsets afresh, without embedding again: version 2 counted a byte-order mark out of them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-docs-'));
    const bytes = Buffer.from('\ufeffFirst paragraph here.');
    writeFileSync(join(dir, 'bom.txt'), bytes);
    mkdirSync(join(dir, '.svc-index'));
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const chunks = [{ start: 0, end: 21, text: 'First paragraph here.' }];
    const e = counting();
    const encoder = await e.identity();
    writeFileSync(join(dir, '.svc-index', 'index.bin'), versionTwo({ encoder, documents: [{ source: 'bom.txt', size: bytes.length, mtimeMs: statSync(join(dir, 'bom.txt')).mtimeMs, sha256, chunks, vectors: Float32Array.from([1, 0]) }] }));
    const idx = new DocumentIndex(dir, () => undefined);
    idx.load();
    await idx.refresh(e);
    expect(e.texts).toEqual([]);
    const [hit] = idx.search(Float32Array.from([1, 0]), () => true, 5);
    expect([hit.chunk.start, hit.chunk.end, hit.score]).toEqual([1, 22, 1]);
  });

  it('searches by dot product, best first, through the visibility filter', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-docs-'));
    writeFileSync(join(dir, 'long.txt'), 'xxxxxxxx');
    writeFileSync(join(dir, 'vowels.txt'), 'aeio');
    writeFileSync(join(dir, 'labels.json'), JSON.stringify({ 'vowels.txt': ['v'] }));
    const idx = new DocumentIndex(dir, () => undefined);
    await idx.refresh(counting());
    const q = Float32Array.from([0, 1]);
    expect(idx.search(q, () => true, 2).map((h) => [h.source, h.labels])).toEqual([['vowels.txt', ['v']], ['long.txt', []]]);
    expect(idx.search(q, (labels) => labels.length === 0, 2).map((h) => h.source)).toEqual(['long.txt']);
    expect(idx.search(q, () => true, 1)).toHaveLength(1);
  });
});
