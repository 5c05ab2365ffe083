import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { syntheticModel } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(120_000);

interface Chunk {
  source: string;
  start: number;
  end: number;
  text: string;
  labels: string[];
  score: number;
  rerank_score: number | null;
}

const PETS = 'Cats sleep most of the day and hunt at night.\n\nDogs like long walks in the park. They also like to play fetch with a ball.\n';
const PAY = 'Salaries are reviewed every March by the pay committee.\n';
const TRAINS = `${'The night train leaves at ten and arrives at dawn. '.repeat(80)}\n\nTickets are sold at the station.\n`;

/** A folder of documents: pets.md, trains.txt (long: several chunks), hr/pay.txt labelled hr (with a byte-order mark). */
function documents(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-index-'));
  mkdirSync(join(dir, 'hr'));
  writeFileSync(join(dir, 'pets.md'), PETS);
  writeFileSync(join(dir, 'trains.txt'), TRAINS);
  // Saved with a byte-order mark (as Windows editors do): offsets still index the file as readFileSync(…, 'utf8') reads it.
  writeFileSync(join(dir, 'hr', 'pay.txt'), `\ufeff${PAY}`);
  writeFileSync(join(dir, 'labels.json'), JSON.stringify({ 'hr/': ['hr'] }));
  // Neither indexed: a binary file and a format the index does not read.
  writeFileSync(join(dir, 'photo.txt'), Buffer.from([0xff, 0xd8, 0xff, 0x00, 0x10]));
  writeFileSync(join(dir, 'archive.zip'), 'PK');
  return dir;
}

const dot = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i], 0);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('POST /v1/retrieve (the real server process, -index with -embed)', () => {
  let srv: RunningServer;
  let dir: string;
  const encoder = () => syntheticModel('bert-tiny');

  afterEach(async () => {
    await srv?.stop();
  });

  const retrieve = (body: unknown, key?: string) => postJson(`${srv.url}/v1/retrieve`, body, key ? { authorization: `Bearer ${key}` } : {});

  it('answers the chunks nearest the query by cosine similarity of the encoder\'s own vectors, with offsets into their documents', async () => {
    dir = documents();
    srv = await startServer(['-m', syntheticModel('qwen2-tiny'), '-embed', encoder(), '-index', '-index-dir', dir, '-threads', '1']);
    const query = 'when are salaries reviewed?';
    const r = await retrieve({ query, top_k: 50 });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ object: 'list', model: expect.stringMatching(/^bert-tiny/), index_model: r.json.model });
    const data = r.json.data as Chunk[];
    // Every chunk of the three text documents (the binary and the zip are not indexed).
    expect([...new Set(data.map((c) => c.source))].sort()).toEqual(['hr/pay.txt', 'pets.md', 'trains.txt']);
    expect(data.filter((c) => c.source === 'trains.txt').length).toBeGreaterThan(1);
    for (const c of data) {
      const file = readFileSync(join(dir, c.source), 'utf8');
      expect(file.slice(c.start, c.end)).toBe(c.text);
      expect(c.text.length).toBeLessThanOrEqual(1000);
      expect(c.labels).toEqual(c.source === 'hr/pay.txt' ? ['hr'] : []);
      expect(c.rerank_score).toBeNull();
    }
    // The scores are the cosine of the vectors /v1/embeddings gives for the query and the chunk.
    const emb = await postJson(`${srv.url}/v1/embeddings`, { input: [query, ...data.map((c) => c.text)] });
    const vecs = (emb.json.data as Array<{ embedding: number[] }>).map((d) => d.embedding);
    data.forEach((c, i) => expect(c.score).toBeCloseTo(dot(vecs[0], vecs[i + 1]), 5));
    const scores = data.map((c) => c.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    // The documents' chunks tile them: nothing but whitespace between or around them.
    const trains = data.filter((c) => c.source === 'trains.txt').sort((a, b) => a.start - b.start);
    expect(trains.map((c) => c.text).join(' ').replace(/\s+/g, ' ')).toBe(TRAINS.trim().replace(/\s+/g, ' '));

    const top = await retrieve({ query, top_k: 2 });
    expect((top.json.data as Chunk[]).map((c) => [c.source, c.start])).toEqual(data.slice(0, 2).map((c) => [c.source, c.start]));
    const dflt = await retrieve({ query });
    expect(dflt.json.data).toHaveLength(5);
  });

  it('follows the folder without a restart: a new, changed or removed document counts at the next retrieve', async () => {
    dir = documents();
    srv = await startServer(['-m', syntheticModel('qwen2-tiny'), '-embed', encoder(), '-index', '-index-dir', dir, '-threads', '1']);
    const sources = async () => [...new Set(((await retrieve({ query: 'anything', top_k: 50 })).json.data as Chunk[]).map((c) => c.source))].sort();
    expect(await sources()).toEqual(['hr/pay.txt', 'pets.md', 'trains.txt']);
    writeFileSync(join(dir, 'birds.txt'), 'Swallows fly south in autumn.');
    rmSync(join(dir, 'trains.txt'));
    writeFileSync(join(dir, 'pets.md'), 'Goldfish need clean water.');
    await sleep(1100);
    const r = await retrieve({ query: 'anything', top_k: 50 });
    expect([...new Set((r.json.data as Chunk[]).map((c) => c.source))].sort()).toEqual(['birds.txt', 'hr/pay.txt', 'pets.md']);
    expect((r.json.data as Chunk[]).find((c) => c.source === 'pets.md')!.text).toBe('Goldfish need clean water.');
  });

  it('keeps the index on disk: a restart embeds only the query; a damaged index file is built again', async () => {
    dir = documents();
    const args = ['-m', syntheticModel('qwen2-tiny'), '-embed', encoder(), '-index', '-index-dir', dir, '-threads', '1'];
    srv = await startServer(args);
    const first = await retrieve({ query: 'night trains', top_k: 3 });
    await srv.stop();

    srv = await startServer(args);
    const again = await retrieve({ query: 'night trains', top_k: 3 });
    expect(again.json.data).toEqual(first.json.data);
    const stats = (await (await fetch(`${srv.url}/v1/stats?model=${encodeURIComponent(again.json.model)}`)).json()) as { inputs: number };
    expect(stats.inputs).toBe(1);
    await srv.stop();

    writeFileSync(join(dir, '.svc-index', 'index.bin'), 'SVCIDX1\ngarbage');
    srv = await startServer(args);
    const rebuilt = await retrieve({ query: 'night trains', top_k: 3 });
    expect(rebuilt.status).toBe(200);
    expect((rebuilt.json.data as Chunk[]).map((c) => [c.source, c.start, c.end])).toEqual((first.json.data as Chunk[]).map((c) => [c.source, c.start, c.end]));
    expect(srv.logs()).toMatch(/index\.bin cannot be read .*; it is built again/);
  });

  it('shows callers only the documents whose every label they hold, on a server that names its callers', async () => {
    dir = documents();
    writeFileSync(join(dir, 'labels.json'), JSON.stringify({ 'hr/': ['hr'], 'pets.md': ['hr', 'pets'] }));
    const callers = join(mkdtempSync(join(tmpdir(), 'svc-callers-')), 'callers.json');
    writeFileSync(
      callers,
      JSON.stringify({
        callers: [
          { name: 'alice', keys: ['alice-key'], labels: ['hr'] },
          { name: 'bob', keys: ['bob-key'] },
          { name: 'carol', keys: ['carol-key'], labels: ['hr', 'pets'] },
        ],
      }),
    );
    srv = await startServer(['-m', syntheticModel('qwen2-tiny'), '-embed', encoder(), '-index', '-index-dir', dir, '-callers', callers, '-api-key', 'admin-key', '-threads', '1']);
    const sources = async (key: string) => [...new Set(((await retrieve({ query: 'pay', top_k: 50 }, key)).json.data as Chunk[]).map((c) => c.source))].sort();
    expect(await sources('alice-key')).toEqual(['hr/pay.txt', 'trains.txt']);
    expect(await sources('bob-key')).toEqual(['trains.txt']);
    expect(await sources('carol-key')).toEqual(['hr/pay.txt', 'pets.md', 'trains.txt']);
    // A bare -api-key names nobody and holds no labels: on a server with named callers it sees the unlabelled.
    expect(await sources('admin-key')).toEqual(['trains.txt']);
    expect((await retrieve({ query: 'pay' })).status).toBe(401);

    // A labels file that cannot be read shows nothing rather than too much, until it is mended.
    writeFileSync(join(dir, 'labels.json'), '{"hr/": "hr"');
    await sleep(1100);
    const broken = await retrieve({ query: 'pay' }, 'bob-key');
    expect(broken.status).toBe(500);
    expect(broken.json.error.message).toMatch(/^the index cannot be brought up to date: index labels.json is not JSON/);
    writeFileSync(join(dir, 'labels.json'), JSON.stringify({ 'hr/': ['hr'] }));
    await sleep(1100);
    expect(await sources('bob-key')).toEqual(['pets.md', 'trains.txt']);
  });

  it('reranks with the -rerank cross-encoder: rerank_score is its relevance for (query, chunk), and orders the answer', async () => {
    dir = documents();
    srv = await startServer(['-m', syntheticModel('qwen2-tiny'), '-embed', encoder(), '-rerank', syntheticModel('bert-rerank-tiny'), '-index', '-index-dir', dir, '-threads', '1']);
    const query = 'pets that sleep';
    const r = await retrieve({ query, top_k: 3, rerank: true });
    expect(r.status).toBe(200);
    const data = r.json.data as Chunk[];
    expect(data).toHaveLength(3);
    const ranked = data.map((c) => c.rerank_score!);
    expect(ranked).toEqual([...ranked].sort((a, b) => b - a));
    const rr = await postJson(`${srv.url}/rerank`, { query, documents: data.map((c) => c.text) });
    const byIndex = new Map((rr.json.results as Array<{ index: number; relevance_score: number }>).map((x) => [x.index, x.relevance_score]));
    data.forEach((c, i) => expect(c.rerank_score).toBeCloseTo(byIndex.get(i)!, 5));
    // The best reranked chunk is the cross-encoder's best of every chunk, not only of the top 3 by cosine.
    const all = (await retrieve({ query, top_k: 50 })).json.data as Chunk[];
    const every = await postJson(`${srv.url}/rerank`, { query, documents: all.map((c) => c.text), top_n: 1 });
    expect(data[0].text).toBe(all[every.json.results[0].index].text);
  });

  it('refuses bad requests, a server without -index, and one with no encoder', async () => {
    dir = documents();
    srv = await startServer(['-m', syntheticModel('qwen2-tiny'), '-embed', encoder(), '-index', '-index-dir', dir, '-threads', '1']);
    const cases: Array<[unknown, string]> = [
      [{}, 'query is required'],
      [{ query: '  ' }, 'query is required'],
      [{ query: 5 }, 'query must be a string'],
      [{ query: 'x', top_k: 51 }, 'top_k must not be greater than 50'],
      [{ query: 'x', top_k: 0 }, 'top_k must not be less than 1'],
      [{ query: 'x', top_k: 2.5 }, 'top_k must be an integer number'],
      [{ query: 'x', rerank: 'yes' }, 'rerank must be a boolean value'],
      [{ query: 'x', rerank: true }, 'this server has no reranker: start it with -rerank <model>'],
    ];
    for (const [body, message] of cases) {
      const r = await retrieve(body);
      expect({ body, status: r.status, message: r.json.error?.message }).toEqual({ body, status: 400, message: expect.stringContaining(message) });
    }
    await srv.stop();

    srv = await startServer(['-m', syntheticModel('qwen2-tiny'), '-embed', encoder(), '-threads', '1']);
    const off = await retrieve({ query: 'x' });
    expect(off.status).toBe(400);
    expect(off.json.error.message).toBe('retrieval is off: start the server with -index and -embed <encoder>');
    await srv.stop();

    srv = await startServer(['-m', syntheticModel('qwen2-tiny'), '-index', '-index-dir', dir, '-threads', '1']);
    const noEncoder = await retrieve({ query: 'x' });
    expect(noEncoder.status).toBe(400);
    expect(noEncoder.json.error.message).toMatch(/^this server is serving qwen2-tiny\S*, a decoder, and has no encoder loaded/);
  });
});
