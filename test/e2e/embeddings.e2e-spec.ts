import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { basename } from 'node:path';
import { bertReference, dot, maxAbsDiff } from './helpers/bert-reference';
import { fixtureModel, STORIES, syntheticModel } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

// bert-base-uncased WordPiece ids (the bge vocabulary): [CLS] hello world [SEP], [CLS] the cat sat on the mat [SEP].
const HELLO = { text: 'hello world', tokens: [101, 7592, 2088, 102] };
const CAT = { text: 'the cat sat on the mat', tokens: [101, 1996, 4937, 2938, 2006, 1996, 13523, 102] };

/** Vectors from the engine against numpy's forward pass: the same direction, the same values to float precision. */
function expectSameVector(got: ArrayLike<number>, want: number[]): void {
  expect(got.length).toBe(want.length);
  expect(dot(got, want)).toBeGreaterThan(0.99999);
  expect(maxAbsDiff(got, want)).toBeLessThan(1e-4);
}

function norm(v: ArrayLike<number>): number {
  return Math.sqrt(dot(v, v));
}

describe('embeddings on a BERT encoder (-embed beside a decoder)', () => {
  let srv: RunningServer;
  let bert: string;
  let name: string;
  let reranker: string;
  let openai: OpenAI;
  let ollama: Ollama;
  let ref: number[][];

  beforeAll(async () => {
    bert = syntheticModel('bert-tiny');
    name = basename(bert, '.gguf');
    ref = bertReference(bert, [HELLO.tokens, CAT.tokens]);
    reranker = syntheticModel('bert-rerank-tiny');
    srv = await startServer(['-m', fixtureModel(STORIES), '-embed', bert, '-rerank', reranker, '-threads', '2']);
    openai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'none', maxRetries: 0 });
    ollama = new Ollama({ host: srv.url });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('the official openai client gets the reference vectors (base64 on the wire), in input order, with token usage', async () => {
    const r = await openai.embeddings.create({ model: name, input: [HELLO.text, CAT.text, HELLO.text] });
    expect(r.object).toBe('list');
    expect(r.model).toBe(name);
    expect(r.data.map((d) => [d.object, d.index])).toEqual([['embedding', 0], ['embedding', 1], ['embedding', 2]]);
    expectSameVector(r.data[0].embedding, ref[0]);
    expectSameVector(r.data[1].embedding, ref[1]);
    expect(r.data[2].embedding).toEqual(r.data[0].embedding);
    for (const d of r.data) expect(norm(d.embedding)).toBeCloseTo(1, 5);
    expect(r.usage).toEqual({ prompt_tokens: 16, total_tokens: 16 });
  });

  it('/v1/models tells a cross-encoder from an encoder (both list as embeddings): svc_reranker', async () => {
    const list = (await (await fetch(`${srv.url}/v1/models`)).json()) as { data: Array<{ id: string; capabilities: string[]; svc_reranker?: boolean }> };
    const byId = new Map(list.data.map((m) => [m.id, m]));
    expect(byId.get(basename(reranker, '.gguf'))).toMatchObject({ capabilities: ['embeddings'], svc_reranker: true });
    expect(byId.get(name)).toMatchObject({ capabilities: ['embeddings'] });
    expect(byId.get(name)?.svc_reranker).toBeUndefined();
  });

  it('float and base64 carry the same numbers; a batch equals its inputs one at a time', async () => {
    const asFloat = await postJson(`${srv.url}/v1/embeddings`, { model: name, input: CAT.text, encoding_format: 'float' });
    const asB64 = await postJson(`${srv.url}/v1/embeddings`, { model: name, input: CAT.text, encoding_format: 'base64' });
    expect(asFloat.status).toBe(200);
    const buf = Buffer.from(asB64.json.data[0].embedding, 'base64');
    const decoded = Array.from({ length: buf.length / 4 }, (_, i) => buf.readFloatLE(i * 4));
    expect(decoded).toEqual(asFloat.json.data[0].embedding);

    // 100 inputs span two native batches (64 sequences each): each equals its single embedding.
    const texts = Array.from({ length: 100 }, (_, i) => `sentence number ${i} about ${i % 7 ? 'cats' : 'dogs'}`);
    const batch = await openai.embeddings.create({ model: name, input: texts, encoding_format: 'float' });
    for (const i of [0, 1, 63, 64, 99]) {
      const one = await openai.embeddings.create({ model: name, input: texts[i], encoding_format: 'float' });
      expect(maxAbsDiff(batch.data[i].embedding, one.data[0].embedding)).toBeLessThan(1e-5);
    }
  });

  it('concurrent requests each get their own vectors', async () => {
    const inputs = [HELLO, CAT, HELLO, CAT, CAT, HELLO, CAT, HELLO];
    const all = await Promise.all(inputs.map((x) => openai.embeddings.create({ model: name, input: x.text, encoding_format: 'float' })));
    all.forEach((r, i) => expectSameVector(r.data[0].embedding, inputs[i] === HELLO ? ref[0] : ref[1]));
  });

  it('dimensions keeps the first ones at unit length', async () => {
    const r = await openai.embeddings.create({ model: name, input: HELLO.text, dimensions: 8, encoding_format: 'float' });
    const v = r.data[0].embedding;
    expect(v).toHaveLength(8);
    expect(norm(v)).toBeCloseTo(1, 5);
    const head = ref[0].slice(0, 8);
    expectSameVector(v, head.map((x) => x / norm(head)));
    const bad = await postJson(`${srv.url}/v1/embeddings`, { model: name, input: 'x', dimensions: 65 });
    expect([bad.status, bad.json.error.message]).toEqual([400, `dimensions must be an integer from 1 to 64 (${name} writes 64), got 65`]);
  });

  it('refuses what the spec refuses, in the chat-completions error shape', async () => {
    const cases: Array<[unknown, string]> = [
      [{ input: [1, 2, 3] }, 'input[0] holds token ids; this server embeds text: send strings'],
      [{ input: [[1, 2], [3]] }, 'input[0] holds token ids; this server embeds text: send strings'],
      [{ input: '' }, 'input is an empty string: there is nothing to embed'],
      [{ input: ['a', ''] }, 'input[1] is an empty string: there is nothing to embed'],
      [{ input: [] }, 'input is an empty array: there is nothing to embed'],
      [{}, 'input is required'],
      [{ input: { text: 'a' } }, 'input must be a string or an array of strings'],
      [{ input: 'a', encoding_format: 'int8' }, 'encoding_format "int8" is not one of float, base64'],
      [{ input: Array(2049).fill('a') }, 'input holds 2049 strings; at most 2048 are embedded at once'],
      [{ input: 'a', model: 'stories260K' }, `stories260K is a decoder and cannot embed; this server's encoder is ${name}`],
      [{ input: 'word '.repeat(600) }, `input is 602 tokens; ${name} reads at most 512`],
    ];
    for (const [body, message] of cases) {
      const r = await postJson(`${srv.url}/v1/embeddings`, { model: name, ...(body as object) });
      expect([r.status, r.json]).toEqual([400, { error: { message, type: 'Bad Request' } }]);
    }
    const unknown = await postJson(`${srv.url}/v1/embeddings`, { model: 'text-embedding-3-small', input: 'a' });
    expect([unknown.status, unknown.json.error.message]).toEqual([404, expect.stringMatching(/^no model named text-embedding-3-small; available: stories260K, /)]);
    // 2048 strings is the limit, not past it.
    const most = await postJson(`${srv.url}/v1/embeddings`, { model: name, input: Array(2048).fill('a'), encoding_format: 'base64' });
    expect([most.status, most.json.data.length, most.json.usage.prompt_tokens]).toEqual([200, 2048, 3 * 2048]);
  });

  it('the official ollama client embeds (cut to fit by default) and the older route answers one vector', async () => {
    const r = await ollama.embed({ model: name, input: [HELLO.text, CAT.text] });
    expect(r.model).toBe(name);
    expectSameVector(r.embeddings[0], ref[0]);
    expectSameVector(r.embeddings[1], ref[1]);
    expect((r as any).prompt_eval_count).toBe(12);
    expect((r as any).total_duration).toBeGreaterThan(0);

    const one = await ollama.embeddings({ model: name, prompt: CAT.text });
    expectSameVector(one.embedding, ref[1]);

    const long = await postJson(`${srv.url}/api/embed`, { model: name, input: 'word '.repeat(600) });
    expect([long.status, long.json.prompt_eval_count, long.json.embeddings[0].length]).toEqual([200, 512, 64]);
    // Cut to fit with its closing [SEP] kept, as sentence-transformers cuts.
    expectSameVector(long.json.embeddings[0], bertReference(bert, [[101, ...Array(510).fill(2773), 102]])[0]);
    const list = await postJson(`${srv.url}/api/embeddings`, { model: name, prompt: ['a', 'b'] });
    expect([list.status, list.json]).toEqual([400, { error: 'prompt must be a string (/api/embed takes a list as input)' }]);
    const refused = await postJson(`${srv.url}/api/embed`, { model: name, input: 'word '.repeat(600), truncate: false });
    expect([refused.status, refused.json]).toEqual([400, { error: `input is 602 tokens; ${name} reads at most 512` }]);
    const empty = await postJson(`${srv.url}/api/embed`, { model: name, input: '' });
    expect([empty.status, empty.json]).toEqual([400, { error: 'input is an empty string: there is nothing to embed' }]);
    // No input: the local runner's preload, answered with no vectors.
    const preload = await postJson(`${srv.url}/api/embed`, { model: name });
    expect([preload.status, preload.json.model, preload.json.embeddings]).toEqual([200, name, []]);
    const decoder = await postJson(`${srv.url}/api/embed`, { model: 'stories260K', input: 'a' });
    expect([decoder.status, decoder.json]).toEqual([400, { error: `stories260K is a decoder and cannot embed; this server's encoder is ${name}` }]);
  });

  it('lists the encoder as an embeddings model; it cannot generate', async () => {
    const models = await openai.models.list();
    expect(models.data.find((m) => m.id === name)).toMatchObject({ capabilities: ['embeddings'] });
    const show: any = await ollama.show({ model: name });
    expect(show.capabilities).toEqual(['embedding']);
    const ps = await ollama.ps();
    expect(ps.models.find((m) => m.name === name)).toMatchObject({ context_length: 512, size: expect.any(Number) });
    const chat = await postJson(`${srv.url}/v1/chat/completions`, { model: name, messages: [{ role: 'user', content: 'hi' }] });
    expect([chat.status, chat.json.error.message]).toEqual([400, `${name} is an encoder and cannot generate text`]);
    const gen = await postJson(`${srv.url}/api/generate`, { model: name, prompt: 'hi', stream: false });
    expect([gen.status, gen.json]).toEqual([400, { error: `${name} is an encoder and cannot generate text` }]);
    // The decoder still generates beside it.
    const done = await openai.completions.create({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 4, temperature: 0 });
    expect(done.choices[0].text.length).toBeGreaterThan(0);
  });

  describe('rerank on a cross-encoder (-rerank)', () => {
    const QUERY = { text: 'the cat', tokens: [1996, 4937] };
    // Documents with their WordPiece ids; a pair is [CLS] query [SEP] document, as llama-server builds it for this vocabulary.
    const DOCS = [
      { text: 'the cat sat on the mat', tokens: [1996, 4937, 2938, 2006, 1996, 13523] },
      { text: 'hello world', tokens: [7592, 2088] },
      { text: 'the mat', tokens: [1996, 13523] },
      { text: 'world', tokens: [2088] },
    ];
    const pair = (d: { tokens: number[] }) => [101, ...QUERY.tokens, 102, ...d.tokens];
    const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
    let logits: number[];
    let rrName: string;
    let best: number[];

    beforeAll(() => {
      rrName = basename(reranker, '.gguf');
      logits = bertReference(reranker, DOCS.map(pair)) as unknown as number[];
      best = DOCS.map((_, i) => i).sort((a, b) => logits[b] - logits[a]);
      // The fixture's logits are close together: the test needs them apart by more than float noise.
      for (let i = 1; i < best.length; i++) expect(logits[best[i - 1]] - logits[best[i]]).toBeGreaterThan(1e-4);
    });

    it('documents form: the reference logits, best first, as probabilities and logits, with documents and usage', async () => {
      for (const path of ['/v1/rerank', '/rerank', '/rerank/v1/rerank']) {
        const r = await postJson(`${srv.url}${path}`, { model: rrName, query: QUERY.text, documents: DOCS.map((d, i) => (i % 2 ? { text: d.text } : d.text)) });
        expect(r.status).toBe(200);
        expect(r.json.model).toBe(rrName);
        expect(r.json.results.map((x: any) => x.index)).toEqual(best);
        for (const x of r.json.results) {
          expect(Math.abs(x.score - logits[x.index])).toBeLessThan(1e-4);
          expect(x.relevance_score).toBeCloseTo(sigmoid(x.score), 12);
          expect(x.document).toEqual({ text: DOCS[x.index].text });
        }
        expect(r.json.usage).toEqual({ prompt_tokens: DOCS.reduce((n, d) => n + pair(d).length, 0), total_tokens: DOCS.reduce((n, d) => n + pair(d).length, 0) });
      }
      const top = await postJson(`${srv.url}/v1/rerank`, { query: QUERY.text, documents: DOCS.map((d) => d.text), top_n: 2, top_k: 3, return_documents: false });
      expect(top.json.results.map((x: any) => [x.index, x.document])).toEqual([[best[0], undefined], [best[1], undefined]]);
      const byK = await postJson(`${srv.url}/v1/rerank`, { query: QUERY.text, documents: DOCS.map((d) => d.text), top_k: 3 });
      expect(byK.json.results.map((x: any) => x.index)).toEqual(best.slice(0, 3));
    });

    it('texts form: a bare array of probabilities, or logits with raw_scores; texts with return_text', async () => {
      const r = await postJson(`${srv.url}/rerank`, { query: QUERY.text, texts: DOCS.map((d) => d.text) });
      expect(r.json.map((x: any) => x.index)).toEqual(best);
      for (const x of r.json) {
        expect(Object.keys(x).sort()).toEqual(['index', 'score']);
        expect(Math.abs(x.score - sigmoid(logits[x.index]))).toBeLessThan(1e-4);
      }
      const raw = await postJson(`${srv.url}/rerank`, { query: QUERY.text, texts: DOCS.map((d) => d.text), raw_scores: true, return_text: true });
      for (const x of raw.json) {
        expect(Math.abs(x.score - logits[x.index])).toBeLessThan(1e-4);
        expect(x.text).toBe(DOCS[x.index].text);
      }
    });

    it('cuts a pair longer than the model reads; refuses the rest in the spec\'s words', async () => {
      const long = await postJson(`${srv.url}/v1/rerank`, { query: QUERY.text, documents: ['word '.repeat(600), 'world'] });
      expect([long.status, long.json.usage.prompt_tokens]).toEqual([200, 512 + 5]);
      // What lies past the cut changes nothing: a BERT pair ends with the document (no closing
      // token), and its last word was kept in the last place read.
      const C = 'cat '.repeat(600);
      const tails = await postJson(`${srv.url}/v1/rerank`, { query: 'dog', documents: [C, `${C}zebra`, `${C}apple`], return_documents: false });
      const byIndex = (tails.json.results as Array<{ index: number; relevance_score: number }>).sort((a, b) => a.index - b.index).map((r) => r.relevance_score);
      expect(new Set(byIndex).size).toBe(1);
      const cases: Array<[string, unknown, string]> = [
        ['/rerank', { texts: ['a'] }, 'query is required'],
        ['/rerank', { query: '', documents: ['a'] }, 'query is required'],
        ['/rerank', { query: 'q', texts: [] }, 'texts is an empty array'],
        ['/v1/rerank', { query: 'q' }, 'no documents'],
        ['/v1/rerank', { query: 'q', documents: [] }, 'no documents'],
        ['/v1/rerank', { query: 'q', documents: 'a' }, 'cannot parse request: documents must be an array'],
        ['/v1/rerank', { query: 'q', documents: ['a', 5] }, 'cannot parse request: documents[1] must be a string or an object with a text'],
        ['/v1/rerank', { query: 5, documents: ['a'] }, 'cannot parse request: query must be a string'],
        ['/rerank', { query: 'q', texts: 'a' }, 'cannot parse request: texts must be an array of strings'],
        ['/v1/rerank', { query: 'q', documents: ['a'], top_n: 0 }, 'top_n must be 1 or more, got 0'],
        ['/v1/rerank', { model: name, query: 'q', documents: ['a'] }, `${name} is not a reranker (a cross-encoder); this server's reranker is ${rrName}`],
        ['/v1/rerank', { query: 'word '.repeat(600), documents: ['a'] }, `the query is 602 tokens with its markers; ${rrName} reads at most 512 a pair, with the document`],
        ['/v1/embeddings', { model: rrName, input: 'a' }, `${rrName} is a cross-encoder (a reranker): it scores pairs and writes no embeddings`],
        ['/v1/chat/completions', { model: rrName, messages: [{ role: 'user', content: 'hi' }] }, `${rrName} is an encoder and cannot generate text`],
      ];
      for (const [path, body, message] of cases) {
        const r = await postJson(`${srv.url}${path}`, body);
        expect([path, r.status, r.json]).toEqual([path, 400, { error: { message, type: 'Bad Request' } }]);
      }
    });
  });
});

describe('an encoder under load', () => {
  let srv: RunningServer;
  let name: string;
  const stats = async () => (await (await fetch(`${srv.url}/v1/stats?model=${name}`)).json()) as Record<string, number>;
  // 2048 inputs of ~200 tokens: 8 native calls of 256 inputs, each long enough to be seen.
  const big = { input: Array.from({ length: 2048 }, (_, i) => `${'word '.repeat(200)}${i}`) };

  beforeAll(async () => {
    const bert = syntheticModel('bert-tiny');
    name = basename(bert, '.gguf');
    srv = await startServer(['-m', bert, '-threads', '2', '-concurrency', '1', '-queue', '1']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('a client that leaves stops its request between native calls; /v1/stats counts it', async () => {
    await postJson(`${srv.url}/v1/embeddings`, { input: 'warm up' });
    const before = await stats();
    const ac = new AbortController();
    const gone = fetch(`${srv.url}/api/embed`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(big), signal: ac.signal }).catch(() => undefined);
    // Once its first call runs, the client goes.
    for (let i = 0; i < 200 && (await stats()).calls === before.calls; i++) await new Promise((r) => setTimeout(r, 10));
    ac.abort();
    await gone;
    const small = await postJson(`${srv.url}/v1/embeddings`, { input: 'hello world' });
    expect(small.status).toBe(200);
    const after = await stats();
    expect(after).toMatchObject({ model: name, requests: before.requests + 2, cancelled: before.cancelled + 1, pooling: 'mean', context_per_request: 512 });
    // The small request's call and at most the two the big one had begun: not its eight.
    expect(after.calls - before.calls).toBeLessThanOrEqual(3);
  });

  it('a long request takes turns: one input sent after it is answered long before it', async () => {
    const done: string[] = [];
    const long = postJson(`${srv.url}/api/embed`, big).then((r) => done.push(`long ${r.status}`));
    const before = (await stats()).calls;
    for (let i = 0; i < 200 && (await stats()).calls === before; i++) await new Promise((r) => setTimeout(r, 10));
    const short = await postJson(`${srv.url}/v1/embeddings`, { input: 'hello world' });
    done.push(`short ${short.status}`);
    await long;
    expect(done).toEqual(['short 200', 'long 200']);
  });

  it('past -concurrency plus -queue waiting requests, 429 with Retry-After: 1 and an empty body', async () => {
    const all = await Promise.all(Array.from({ length: 4 }, () => fetch(`${srv.url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: big.input.slice(0, 512) }) })));
    const refused = all.filter((r) => r.status === 429);
    expect(all.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(2);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    for (const r of refused) {
      expect(r.headers.get('retry-after')).toBe('1');
      expect(await r.text()).toBe('');
    }
    expect((await stats()).rejected).toBe(refused.length);
  });

  it('keep_alive 0 frees the encoder after a request, never under it (a tokenize past a second was answered 500 "model is disposed")', async () => {
    const input = 'lorem ipsum dolor sit amet '.repeat(1_000_000); // 27 MB: seconds of tokenizing
    const r = await postJson(`${srv.url}/api/embed`, { input, keep_alive: 0, truncate: true });
    expect([r.status, r.json.error]).toEqual([200, undefined]);
    expect(r.json.embeddings).toHaveLength(1);
    // Then it goes, as keep_alive 0 asks.
    for (let i = 0; i < 100 && !srv.logs().includes('unloaded encoder'); i++) await new Promise((res) => setTimeout(res, 100));
    expect(srv.logs()).toMatch(/unloaded encoder \S+ \(keep_alive ran out\)/);
  });
});

describe('-embed and -rerank naming the wrong kind of model', () => {
  let srv: RunningServer;
  let bert: string;
  let reranker: string;

  beforeAll(async () => {
    bert = syntheticModel('bert-tiny');
    reranker = syntheticModel('bert-rerank-tiny');
    srv = await startServer(['-m', fixtureModel(STORIES), '-embed', reranker, '-rerank', bert, '-threads', '2']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('are refused with a 400 naming what each model is, not answered with the wrong numbers', async () => {
    const e = await postJson(`${srv.url}/v1/embeddings`, { input: 'hi' });
    expect([e.status, e.json.error.message]).toEqual([400, `${basename(reranker, '.gguf')} is a cross-encoder (a reranker): it scores pairs and writes no embeddings`]);
    const r = await postJson(`${srv.url}/v1/rerank`, { query: 'q', documents: ['a'] });
    expect([r.status, r.json.error.message]).toEqual([400, `${basename(bert, '.gguf')} is not a reranker (a cross-encoder)`]);
  });
});

describe('an encoder given as -m', () => {
  let srv: RunningServer;
  let bert: string;

  beforeAll(async () => {
    bert = syntheticModel('bert-tiny');
    srv = await startServer(['-m', bert, '-threads', '2']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('is the server default: healthy, embeds without a model name, refuses to generate', async () => {
    const name = basename(bert, '.gguf');
    const health = await (await fetch(`${srv.url}/healthz`)).json();
    expect(health).toMatchObject({ status: 'ok', model: name, id: expect.stringMatching(/^sha256:[0-9a-f]{64}$/) });
    const r = await postJson(`${srv.url}/v1/embeddings`, { input: HELLO.text });
    expect([r.status, r.json.model, r.json.usage.prompt_tokens]).toEqual([200, name, 4]);
    expectSameVector(r.json.data[0].embedding, bertReference(bert, [HELLO.tokens])[0]);
    const chat = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }] });
    expect([chat.status, chat.json.error.message]).toEqual([400, `${name} is an encoder and cannot generate text`]);
    const rerank = await postJson(`${srv.url}/v1/rerank`, { query: 'q', documents: ['a'] });
    expect([rerank.status, rerank.json.error.message]).toEqual([400, 'this server has no reranker: start it with -rerank <model>']);
    // The default model's numbers are the encoder's.
    const stats = await (await fetch(`${srv.url}/v1/stats`)).json();
    expect(stats).toMatchObject({ model: name, requests: 1, inputs: 1, prompt_tokens: 4, calls: 1, rejected: 0, cancelled: 0 });
  });

  it('keep_alive works on the local runner\'s embedding routes as on /api/chat', async () => {
    const name = basename(bert, '.gguf');
    const ps = async () => ((await (await fetch(`${srv.url}/api/ps`)).json()) as { models: Array<{ name: string; expires_at: string }> }).models.find((m) => m.name === name);
    // The -m encoder stays until a request sets a keep_alive.
    expect((await ps())?.expires_at).toBe('2318-01-01T00:00:00.000Z');
    await postJson(`${srv.url}/api/embed`, { model: name, input: 'a', keep_alive: '10m' });
    const until = new Date((await ps())!.expires_at).getTime() - Date.now();
    expect(until).toBeGreaterThan(9 * 60_000);
    expect(until).toBeLessThanOrEqual(10 * 60_000);
    const zero = await postJson(`${srv.url}/api/embeddings`, { model: name, prompt: 'a', keep_alive: 0 });
    expect(zero.status).toBe(200);
    for (let i = 0; i < 60 && (await ps()); i++) await new Promise((r) => setTimeout(r, 100));
    expect(await ps()).toBeUndefined();
    // The next request loads it again.
    const again = await postJson(`${srv.url}/api/embed`, { model: name, input: 'a' });
    expect([again.status, again.json.load_duration > 0]).toEqual([200, true]);
    expect(await ps()).toBeDefined();
    const bad = await postJson(`${srv.url}/api/embed`, { model: name, input: 'a', keep_alive: { m: 5 } });
    expect([bad.status, bad.json]).toEqual([400, { error: 'cannot parse request: keep_alive: keep_alive must be a string (got an object)' }]);
  });
});
