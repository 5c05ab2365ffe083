/**
 * Fill in the middle: `suffix` on /api/generate (the local runner's insert) and on
 * /v1/completions, on a synthetic code model whose vocabulary has FIM tokens (deepseek-coder's,
 * found by llama.cpp from their text). The prompt is built prefix-suffix-middle, as llama-server's
 * /infill and the local runner's code templates build it; a model without the tokens refuses.
 */
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixtureModel, STORIES, syntheticModel } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

const PREFIX = 'def add(a, b):\n    ';
const SUFFIX = '\n\nprint(add(1, 2))\n';
const GREEDY = { temperature: 0, num_predict: 12 };

describe('fill in the middle (suffix)', () => {
  let srv: RunningServer;
  let ollama: Ollama;
  let fim: { pre: string; suf: string; mid: string; ids: number[] };

  beforeAll(async () => {
    const store = mkdtempSync(join(tmpdir(), 'svc-infill-'));
    copyFileSync(syntheticModel('coder-tiny'), join(store, 'coder.gguf'));
    copyFileSync(fixtureModel(STORIES), join(store, 'stories.gguf'));
    srv = await startServer(['-threads', '2', '-store', store], { env: { OLLAMA_MODELS: mkdtempSync(join(tmpdir(), 'ollama-')) } });
    ollama = new Ollama({ host: srv.url });
    const show = await postJson(`${srv.url}/api/show`, { model: 'coder', verbose: true });
    const tokens = show.json.model_info['tokenizer.ggml.tokens'] as string[];
    const [pre, suf, mid] = ['<｜fim▁begin｜>', '<｜fim▁hole｜>', '<｜fim▁end｜>'];
    fim = { pre, suf, mid, ids: [pre, suf, mid].map((t) => tokens.indexOf(t)) };
    expect(fim.ids.every((i) => i > 0)).toBe(true);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('/api/generate with a suffix reads prefix, suffix, then the middle marker', async () => {
    const filled = await ollama.generate({ model: 'coder', prompt: PREFIX, suffix: SUFFIX, stream: false, options: GREEDY });
    const [pre, suf, mid] = fim.ids;
    const ctx = filled.context;
    // The prompt as read (the context's first prompt_eval_count tokens): markers in PSM order.
    const prompt = ctx.slice(0, filled.prompt_eval_count);
    expect(prompt.filter((t) => fim.ids.includes(t))).toEqual([pre, suf, mid]);
    expect(prompt.at(-1)).toBe(mid);
    // The same text sent raw, markers written out, is the same prompt and the same answer.
    const raw = await ollama.generate({ model: 'coder', prompt: `${fim.pre}${PREFIX}${fim.suf}${SUFFIX}${fim.mid}`, raw: true, stream: false, options: GREEDY });
    expect([filled.prompt_eval_count, filled.response]).toEqual([raw.prompt_eval_count, raw.response]);
    expect(filled.response!.length).toBeGreaterThan(0);
    // Streamed, the same.
    let text = '';
    for await (const p of await ollama.generate({ model: 'coder', prompt: PREFIX, suffix: SUFFIX, stream: true, options: GREEDY })) text += p.response;
    expect(text).toBe(filled.response);
    // Insertion at the very start: an empty prompt with a suffix is no load-only request.
    const atStart = await ollama.generate({ model: 'coder', prompt: '', suffix: SUFFIX, stream: false, options: GREEDY });
    expect([atStart.done_reason, atStart.eval_count]).toEqual(['length', 12]);
    // raw sends the prompt as is, suffix unread (as the local runner).
    const rawWithSuffix = await ollama.generate({ model: 'coder', prompt: PREFIX, suffix: SUFFIX, raw: true, stream: false, options: GREEDY });
    const rawAlone = await ollama.generate({ model: 'coder', prompt: PREFIX, raw: true, stream: false, options: GREEDY });
    expect(rawWithSuffix.response).toBe(rawAlone.response);
  });

  it('/v1/completions takes suffix through the official client, as /api/generate does', async () => {
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused' });
    const c = await client.completions.create({ model: 'coder', prompt: PREFIX, suffix: SUFFIX, max_tokens: 12, temperature: 0 });
    const g = await ollama.generate({ model: 'coder', prompt: PREFIX, suffix: SUFFIX, stream: false, options: GREEDY });
    expect(c.choices[0].text).toBe(g.response);
    expect(c.usage!.prompt_tokens).toBe(g.prompt_eval_count);
    const plain = await client.completions.create({ model: 'coder', prompt: PREFIX, suffix: null, max_tokens: 12, temperature: 0 });
    expect(plain.usage!.prompt_tokens).toBeLessThan(c.usage!.prompt_tokens);
  });

  it("shows insert for a model with FIM tokens; one without refuses a suffix with the local runner's 400", async () => {
    expect((await ollama.show({ model: 'coder' })).capabilities).toEqual(['completion', 'insert']);
    const gen = await postJson(`${srv.url}/api/generate`, { model: 'stories', prompt: 'Once', suffix: 'The end.', stream: false });
    expect([gen.status, gen.json.error]).toEqual([400, 'this model does not support insert (its vocabulary has no fill-in-the-middle tokens): send no suffix']);
    const comp = await postJson(`${srv.url}/v1/completions`, { model: 'stories', prompt: 'Once', suffix: 'The end.' });
    expect([comp.status, comp.json.error.message]).toEqual([400, gen.json.error]);
    expect((await ollama.show({ model: 'stories' })).capabilities).toEqual(['completion']);
    const images = await postJson(`${srv.url}/api/generate`, { model: 'coder', prompt: 'x', suffix: 'y', images: ['aGk='], stream: false });
    expect(images.status).toBe(400);
  });
});
