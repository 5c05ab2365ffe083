import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fixtureModel, STORIES, syntheticModel } from './helpers/fixtures';
import { pdf } from './helpers/media';
import { writeOllamaModel } from './helpers/ollama-store';
import { postJson, RunningServer, startServer } from './helpers/server';
import { HELD_OUT } from '../fixtures/route-heldout';

jest.setTimeout(240_000);

/**
 * POST /v1/route on the real server. The synthetic models have random weights, so which category
 * the embedding classifier picks means nothing here: these tests check the mechanics (the method,
 * the encoder chosen, deterministic answers, ranking from metadata, fit, nothing loaded). The
 * classifier's accuracy needs the real all-minilm: set SVC_ALLMINILM to its GGUF file.
 */

const tmp = (p: string) => mkdtempSync(join(tmpdir(), p));
const route = (srv: RunningServer, body: unknown) => postJson(`${srv.url}/v1/route`, body);
const psNames = async (srv: RunningServer) => ((await (await fetch(`${srv.url}/api/ps`)).json()) as { models: Array<{ name: string }> }).models.map((m) => m.name);
/** Every field the spec lists, and no other. */
const FIELDS = ['candidates', 'category', 'confidence', 'context', 'encoder', 'estimated_tokens', 'fits', 'fits_memory', 'memory_budget_bytes', 'method', 'model', 'model_reason', 'object', 'reason', 'vision'];

describe('route by rules: several chat models, -embed an encoder that is not all-minilm', () => {
  let srv: RunningServer;
  let bert: string;
  const CHAT = ['qwen2-tiny', 'thinker-tiny', 'tiny-coder', 'tiny-vision:latest'];

  beforeAll(async () => {
    bert = syntheticModel('bert-tiny');
    const store = tmp('svc-route-store-');
    copyFileSync(syntheticModel('qwen2-tiny'), join(store, 'qwen2-tiny.gguf'));
    // Qwen2.5's template (tools) under a code model's name.
    copyFileSync(syntheticModel('qwen2.5-tiny'), join(store, 'tiny-coder.gguf'));
    // A think block; twice qwen2-tiny's parameters (19.5M against 9.95M): one point more.
    copyFileSync(syntheticModel('thinker-tiny'), join(store, 'thinker-tiny.gguf'));
    // The local runner's store: weights with a vision projector beside them.
    const ollama = tmp('svc-route-ollama-');
    writeOllamaModel(ollama, 'tiny-vision', [
      { mediaType: 'application/vnd.ollama.image.model', data: readFileSync(syntheticModel('qwen2-tiny')) },
      { mediaType: 'application/vnd.ollama.image.projector', data: readFileSync(fixtureModel('mmproj-tinygemma3.gguf')) },
    ]);
    // A completion model as the default: loaded at boot, and no chat model (not a candidate).
    srv = await startServer(['-store', store, '-m', fixtureModel(STORIES), '-embed', bert, '-threads', '1'], { env: { OLLAMA_MODELS: ollama } });
  });
  afterAll(() => srv?.stop());

  it('answers every field; code goes to the code model by rules, and no encoder is named', async () => {
    const r = await route(srv, { text: 'Write a Python function that parses a CSV file:\n```python\ndef parse(path):\n```' });
    expect(r.status).toBe(200);
    expect(Object.keys(r.json).sort()).toEqual(FIELDS);
    expect(r.json).toMatchObject({ object: 'route', category: 'code', method: 'rules', encoder: null, model: 'tiny-coder', vision: false, fits: true, fits_memory: true, context: 4096 });
    expect(r.json.reason).toMatch(/^keywords: a code block/);
    expect(r.json.model_reason).toMatch(/^the highest score \(0\.85\): 10M parameters -2\.65, a code model by name \+3, renders tools \+0\.5$/);
    expect(r.json.candidates.map((c: { model: string }) => c.model).sort()).toEqual(CHAT);
    expect(r.json.candidates[0]).toEqual({ model: 'tiny-coder', score: 0.85, reason: expect.any(String), params: 9950144, context: 4096, vision: false });
    expect(r.json.memory_budget_bytes).toBeGreaterThan(0);
    expect(r.json.confidence).toBeGreaterThan(0.5);
  });

  it('reasoning goes to the model with a think block; a picture to the one with a vision projector', async () => {
    const math = await route(srv, { messages: [{ role: 'user', content: 'Prove that the square root of 2 is irrational, step by step.' }] });
    expect(math.json).toMatchObject({ category: 'reasoning', method: 'rules', model: 'thinker-tiny' });
    const pic = await route(srv, { text: 'What is this?', has_image: true });
    expect(pic.json).toMatchObject({ category: 'image', method: 'attachment', confidence: 1, reason: '1 picture attached', model: 'tiny-vision:latest', vision: true, estimated_tokens: 4 + 4 + 576 });
    const part = await route(srv, { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }], images: 0 });
    expect(part.json).toMatchObject({ category: 'image', method: 'attachment', model: 'tiny-vision:latest' });
    // A video is read as frames, by a vision model too; a PDF is read as text by any.
    const clip = await route(srv, { messages: [{ role: 'user', content: [{ type: 'video_url', video_url: { url: 'https://example.com/a.mp4' } }] }] });
    expect(clip.json).toMatchObject({ category: 'image', method: 'attachment', model: 'tiny-vision:latest' });
    const doc = await route(srv, { messages: [{ role: 'user', content: [{ type: 'file', file: { file_data: pdf(['A page of notes']).toString('base64') } }, { type: 'text', text: 'hello there' }] }] });
    expect(doc.json.method).not.toBe('attachment');
  });

  it('a PDF counts as the text chat reads of it, in every dialect\'s part: a long one goes by length and does not fit', async () => {
    // 30 pages of 70 lines: about 130,000 characters, some 32,000 tokens (chat refuses it on a 4096-position model).
    const line = 'The quick brown fox jumps over the lazy dog, then rests. ';
    const book = pdf(Array.from({ length: 30 }, (_, i) => Array.from({ length: 70 }, (_, k) => `${i}.${k} ${line}`).join('\n'))).toString('base64');
    const parts = [
      { type: 'file', file: { filename: 'a.pdf', file_data: `data:application/pdf;base64,${book}` } },
      { type: 'document', title: 'a.pdf', source: { type: 'base64', media_type: 'application/pdf', data: book } },
      { type: 'input_file', filename: 'a.pdf', file_data: `data:application/pdf;base64,${book}` },
    ];
    for (const part of parts) {
      const r = await route(srv, { messages: [{ role: 'user', content: [part, { type: 'text', text: 'Summarize' }] }] });
      expect([r.status, part.type]).toEqual([200, part.type]);
      expect(r.json).toMatchObject({ category: 'long-context', method: 'length', fits: false, fits_memory: true, context: 4096 });
      expect(r.json.estimated_tokens).toBeGreaterThan(30000);
      expect(r.json.reason).toMatch(/^1\d{5} characters, over 6000$/);
    }
  });

  it('a message of only a PDF (or a text document) is routed by the text in it', async () => {
    const only = await route(srv, { messages: [{ role: 'user', content: [{ type: 'file', file: { file_data: pdf(['Prove that the square root of 2 is irrational, step by step.']).toString('base64') } }] }] });
    expect(only.status).toBe(200);
    expect(only.json).toMatchObject({ category: 'reasoning', method: 'rules', fits: true });
    // "[PDF, 1 page]", a newline and the page's 60 characters, and one message's 4.
    expect(only.json.estimated_tokens).toBe(Math.ceil((13 + 1 + 60) / 4) + 4);
    const text = await route(srv, { messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'x'.repeat(7000) } }] }] });
    expect(text.json).toMatchObject({ method: 'length', estimated_tokens: 1750 + 4 });
  });

  it('cheap takes the smallest model within one point of the best; local and best agree', async () => {
    const body = { text: 'What are some good books about the history of Rome?' };
    const best = await route(srv, { ...body, prefer: 'best' });
    const local = await route(srv, { ...body, prefer: 'local' });
    const cheap = await route(srv, { ...body, prefer: 'cheap' });
    expect(best.json.category).toBe('general');
    // thinker-tiny: -1.68 + tools 0.5; tiny-coder: -2.65 + tools 0.5 (0.97 below: within one point).
    expect(best.json.candidates.map((c: { model: string; score: number }) => [c.model, c.score])).toEqual([
      ['thinker-tiny', -1.18],
      ['tiny-coder', -2.15],
      ['qwen2-tiny', -2.65],
      ['tiny-vision:latest', -2.65],
    ]);
    expect(best.json.model).toBe('thinker-tiny');
    expect(local.json.model).toBe('thinker-tiny');
    expect(local.json.candidates).toEqual(best.json.candidates);
    expect(cheap.json.model).toBe('tiny-coder');
    expect(cheap.json.model_reason).toMatch(/^the smallest model within one point of the best \(thinker-tiny scores -1\.18; this one -2\.15\)/);
    expect(cheap.json.candidates).toEqual(best.json.candidates);
  });

  it('over 6,000 characters is long-context by length; past the context it does not fit', async () => {
    const long = await route(srv, { text: 'word '.repeat(1300) });
    expect(long.json).toMatchObject({ category: 'long-context', method: 'length', confidence: 1, estimated_tokens: 1625 + 4, fits: true, context: 4096 });
    const at = await route(srv, { text: 'x'.repeat(6000) });
    expect(at.json.method).toBe('rules');
    const huge = await route(srv, { messages: [{ role: 'system', content: 'a'.repeat(8000) }, { role: 'user', content: 'Summarise.' }] });
    expect(huge.json).toMatchObject({ category: 'long-context', method: 'length', estimated_tokens: 2000 + 3 + 8, fits: true });
    const over = await route(srv, { text: 'y'.repeat(16000) });
    expect(over.json).toMatchObject({ fits: false, fits_memory: true, estimated_tokens: 4004 });
    expect(over.json.candidates.every((c: { reason: string }) => c.reason.includes('the conversation does not fit its 4096 positions -5'))).toBe(true);
  });

  it('loads no chat model and generates nothing', async () => {
    await route(srv, { text: 'hello there' });
    const ps = await psNames(srv);
    expect(ps.filter((n) => CHAT.some((c) => n.startsWith(c)))).toEqual([]);
    expect(ps).toContain('stories260K');
  });

  it('refuses malformed requests in the service error shape', async () => {
    const cases: Array<[unknown, string | RegExp]> = [
      [{}, 'send text or messages'],
      [{ text: 'a', messages: [{ role: 'user', content: 'b' }] }, 'send text or messages, not both'],
      [{ text: '' }, 'text is empty'],
      [{ messages: [] }, 'messages is empty'],
      [{ text: 5 }, /^cannot parse request: text: /],
      [{ messages: 'hi' }, /^cannot parse request: messages: /],
      [{ text: 'a', prefer: 'fast' }, /^cannot parse request: prefer: /],
      [{ text: 'a', images: -1 }, /^cannot parse request: images: /],
      [{ text: 'a', images: 1.5 }, /^cannot parse request: images: /],
      [{ text: 'a', has_image: 'yes' }, /^cannot parse request: has_image: /],
      [{ messages: [{ role: 'user', content: 7 }] }, 'messages[0].content must be a string or an array of content parts'],
      // A file is read as chat reads it, and refused as chat refuses it.
      [{ messages: [{ role: 'user', content: [{ type: 'file', file: { file_data: 'aGVsbG8=' } }] }] }, 'file 1 is not a PDF (no %PDF- header)'],
      [{ messages: [{ role: 'user', content: [{ type: 'input_file' }] }] }, 'cannot parse request: messages[0].content[0] needs file_data or file_url (file ids are not stored here)'],
    ];
    for (const [body, message] of cases) {
      const r = await route(srv, body);
      expect([r.status, r.json.error.type]).toEqual([400, 'Bad Request']);
      expect(r.json.error.message).toEqual(typeof message === 'string' ? message : expect.stringMatching(message));
    }
  });
});

describe('route by embedding: the store\'s all-minilm (a copy of the synthetic encoder), -embed another encoder', () => {
  let srv: RunningServer;

  beforeAll(async () => {
    const store = tmp('svc-route-minilm-');
    copyFileSync(syntheticModel('bert-tiny'), join(store, 'all-minilm.gguf'));
    copyFileSync(syntheticModel('qwen2-tiny'), join(store, 'qwen2-tiny.gguf'));
    // 40 MB: the chat model (45 MB of weights) does not fit beside anything.
    srv = await startServer(['-store', store, '-m', fixtureModel(STORIES), '-embed', syntheticModel('bert-tiny'), '-memory-budget', '40000000', '-threads', '1'], { env: { OLLAMA_MODELS: tmp('o-') } });
  });
  afterAll(() => srv?.stop());

  it('classifies by embedding with all-minilm, loads it at the first route, and answers the same each time', async () => {
    expect(await psNames(srv)).not.toContain('all-minilm');
    const body = { text: 'How do I reverse a string in JavaScript?' };
    const a = await route(srv, body);
    expect(a.status).toBe(200);
    expect(a.json).toMatchObject({ method: 'embedding', encoder: 'all-minilm', model: 'qwen2-tiny' });
    expect(['code', 'multilingual', 'reasoning', 'quick-chat', 'general']).toContain(a.json.category);
    expect(a.json.reason).toMatch(/^nearest examples: [a-z-]+ \(cosine -?\d/);
    expect(a.json.confidence).toBeGreaterThan(0);
    expect(a.json.confidence).toBeLessThanOrEqual(1);
    const b = await route(srv, body);
    expect(b.json).toEqual(a.json);
    const ps = await psNames(srv);
    expect(ps).toContain('all-minilm');
    expect(ps).not.toContain('qwen2-tiny');
    // A picture or a long text is decided before the encoder; the encoder is still named.
    expect((await route(srv, { text: 'x', images: 2 })).json).toMatchObject({ method: 'attachment', encoder: 'all-minilm', reason: '2 pictures attached' });
  });

  it('says when the chosen model does not fit the memory left, and how much room there is', async () => {
    const r = await route(srv, { text: 'hello' });
    expect(r.json).toMatchObject({ fits: false, fits_memory: false, model: 'qwen2-tiny' });
    expect(r.json.memory_budget_bytes).toBeGreaterThan(0);
    expect(r.json.memory_budget_bytes).toBeLessThan(40_000_000);
    expect(r.json.candidates[0].reason).toMatch(/does not fit the memory left -3$/);
  });
});

describe('route with -embed all-minilm and no chat model installed', () => {
  let srv: RunningServer;

  beforeAll(async () => {
    const dir = tmp('svc-route-flag-');
    const minilm = join(dir, 'all-minilm.gguf');
    copyFileSync(syntheticModel('bert-tiny'), minilm);
    srv = await startServer(['-m', fixtureModel(STORIES), '-embed', minilm, '-threads', '1'], { env: { OLLAMA_MODELS: tmp('o-') } });
  });
  afterAll(() => srv?.stop());

  it('classifies with the -embed encoder and names no model', async () => {
    const r = await route(srv, { messages: [{ role: 'user', content: 'hi there' }], prefer: 'cheap' });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ method: 'embedding', encoder: 'all-minilm', model: '', model_reason: 'no chat model is installed', vision: false, fits: false, fits_memory: null, context: null, candidates: [] });
    expect(r.json.memory_budget_bytes).toBeGreaterThan(0);
  });
});

const REAL = process.env.SVC_ALLMINILM;
(REAL ? describe : describe.skip)('held-out accuracy of the embedding classifier with the real all-minilm (SVC_ALLMINILM)', () => {
  let srv: RunningServer;

  beforeAll(async () => {
    // Named so the server knows it (the file name, when its metadata does not say all-minilm).
    const file = /all-minilm/i.test(basename(REAL!)) ? REAL! : join(tmp('svc-route-real-'), 'all-minilm.gguf');
    if (file !== REAL) copyFileSync(REAL!, file);
    srv = await startServer(['-m', fixtureModel(STORIES), '-embed', file, '-threads', '1'], { env: { OLLAMA_MODELS: tmp('o-') } });
  });
  afterAll(() => srv?.stop());

  it('reports the accuracy on prompts it was not trained on', async () => {
    let right = 0;
    for (const [category, text] of HELD_OUT) {
      const r = await route(srv, { text });
      expect(r.json.method).toBe('embedding');
      if (r.json.category === category) right++;
    }
    // eslint-disable-next-line no-console
    console.log(`all-minilm nearest-centroid classifier: ${right}/${HELD_OUT.length} held-out prompts (${Math.round((100 * right) / HELD_OUT.length)}%)`);
    expect(right / HELD_OUT.length).toBeGreaterThanOrEqual(0.8);
  });
});
