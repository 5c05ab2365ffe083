import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, Server } from 'node:http';
import { join } from 'node:path';
import { fixtureModel, ROOT, syntheticModel } from './helpers/fixtures';
import { dataUrl, png } from './helpers/images';
import { writeOllamaModel } from './helpers/ollama-store';
import { freePort, greedyFetch, postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(300_000);

/**
 * Image input through a real vision projector: shared/models' gemma3 projector (32x32 images,
 * 2x2 patches: 256 positions an image, 128 wide) on a synthetic chat model of that width (its
 * own text model is not available here). Random weights: the text is noise, but whether the
 * picture reached the model shows in what it writes at temperature 0.
 */
const MMPROJ = fixtureModel('mmproj-tinygemma3.gguf');
const IMAGE_POSITIONS = 256;

const red = png(32, 32, () => [230, 20, 20]);
const checks = png(32, 32, (x, y) => ((x >> 2) + (y >> 2)) % 2 ? [255, 255, 255] : [0, 0, 40]);
const GREEDY = { temperature: 0, max_tokens: 8 };
const QUESTION = 'What is in this picture?';

describe('vision (-mmproj, a gemma3 projector on a 128-wide chat model)', () => {
  let srv: RunningServer;
  let openai: OpenAI;
  let images: Server;
  let imagesUrl: string;
  let textFirst: string;

  beforeAll(async () => {
    srv = await startServer(['-m', syntheticModel('vision-tiny'), '-mmproj', MMPROJ, '-threads', '1', '-concurrency', '2']);
    openai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
    // A local image host for URL sources (no internet): /red.png, /slow.png (never answers), /big.png (over the cap).
    images = createServer((req, res) => {
      if (req.url === '/red.png') return void res.writeHead(200, { 'content-type': 'image/png' }).end(red);
      if (req.url === '/slow.png') return; // the fetch's time limit ends it
      if (req.url === '/late.png') return void setTimeout(() => res.writeHead(200, { 'content-type': 'image/png' }).end(red), 3000);
      if (req.url === '/big.png') return void res.writeHead(200, { 'content-length': String(21 * 1024 * 1024) }).write(Buffer.alloc(16));
      res.writeHead(404).end();
    });
    const port = await freePort();
    await new Promise<void>((r) => images.listen(port, '127.0.0.1', r));
    imagesUrl = `http://127.0.0.1:${port}`;
    // The first request on the fresh server: what a text-only prompt answers before any image ran.
    textFirst = (await openai.chat.completions.create({ model: '', ...GREEDY, messages: [{ role: 'user', content: QUESTION }] })).choices[0].message.content!;
  });
  afterAll(async () => {
    images?.closeAllConnections();
    images?.close();
    await srv?.stop();
  });

  const withImage = (img: Buffer | string) => ({
    model: '',
    ...GREEDY,
    messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: QUESTION }, { type: 'image_url' as const, image_url: { url: typeof img === 'string' ? img : dataUrl(img) } }] }],
  });

  it('health says vision, and /api/show lists the capability', async () => {
    const h = (await (await fetch(`${srv.url}/healthz`)).json()) as { vision: boolean; model: string };
    expect(h.vision).toBe(true);
    const show = await new Ollama({ host: srv.url }).show({ model: h.model });
    expect(show.capabilities).toContain('vision');
  });

  it('a chat image counts its positions in usage.prompt_tokens', async () => {
    const plain = await openai.chat.completions.create({ model: '', ...GREEDY, messages: [{ role: 'user', content: QUESTION }] });
    const seen = await openai.chat.completions.create(withImage(red));
    const extra = seen.usage!.prompt_tokens - plain.usage!.prompt_tokens;
    // 256 image positions, plus the projector's <start_of_image>/<end_of_image> text and a newline.
    expect(extra).toBeGreaterThanOrEqual(IMAGE_POSITIONS);
    expect(extra).toBeLessThan(IMAGE_POSITIONS + 32);
    expect(seen.choices[0].finish_reason).toBeDefined();
  });

  it('the picture reaches the model: two pictures answer differently, the same one the same', async () => {
    const a1 = (await openai.chat.completions.create(withImage(red))).choices[0].message.content;
    const b = (await openai.chat.completions.create(withImage(checks))).choices[0].message.content;
    const a2 = (await openai.chat.completions.create(withImage(red))).choices[0].message.content;
    expect(a2).toBe(a1);
    expect(b).not.toBe(a1);
  });

  it('two image requests at once answer as each alone (concurrency 2), streamed or not', async () => {
    const alone = [(await openai.chat.completions.create(withImage(red))).choices[0].message.content, (await openai.chat.completions.create(withImage(checks))).choices[0].message.content];
    const together = await Promise.all([openai.chat.completions.create(withImage(red)), openai.chat.completions.create(withImage(checks))]);
    expect(together.map((r) => r.choices[0].message.content)).toEqual(alone);
    let streamed = '';
    for await (const c of await openai.chat.completions.create({ ...withImage(red), stream: true })) streamed += c.choices[0]?.delta?.content ?? '';
    expect(streamed).toBe(alone[0]);
  });

  it('a text-only request after image requests answers as on the fresh server (no stale prefix)', async () => {
    await openai.chat.completions.create(withImage(checks));
    const again = await openai.chat.completions.create({ model: '', ...GREEDY, messages: [{ role: 'user', content: QUESTION }] });
    expect(again.choices[0].message.content).toBe(textFirst);
  });

  it('an http(s) image URL is fetched (local host), with a 400 for what cannot be fetched', async () => {
    const byUrl = (await openai.chat.completions.create(withImage(`${imagesUrl}/red.png`))).choices[0].message.content;
    const inline = (await openai.chat.completions.create(withImage(red))).choices[0].message.content;
    expect(byUrl).toBe(inline);
    const missing = await postJson(`${srv.url}/v1/chat/completions`, withImage(`${imagesUrl}/none.png`));
    expect(missing.status).toBe(400);
    expect(missing.json.error).toEqual({ message: `image 1: ${imagesUrl}/none.png could not be fetched`, type: 'Bad Request' });
    // A closed port reads as a missing file: the message told a caller which internal hosts answer.
    const closed = await postJson(`${srv.url}/v1/chat/completions`, withImage('http://127.0.0.1:9/x.png'));
    expect([closed.status, closed.json.error.message]).toEqual([400, 'image 1: http://127.0.0.1:9/x.png could not be fetched']);
    const big = await postJson(`${srv.url}/v1/chat/completions`, withImage(`${imagesUrl}/big.png`));
    expect(big.status).toBe(400);
    expect(big.json.error.message).toBe(`image 1: ${imagesUrl}/big.png is ${21 * 1024 * 1024} bytes; it is taken up to ${20 * 1024 * 1024}`);
    const slow = await postJson(`${srv.url}/v1/chat/completions`, withImage(`${imagesUrl}/slow.png`));
    expect(slow.status).toBe(400);
    expect(slow.json.error.message).toBe(`image 1: ${imagesUrl}/slow.png did not answer whole within 10000 ms`);
  });

  it('the model is held while a request fetches its image: keep_alive does not unload it under the request', async () => {
    // keep_alive 1s ran out during a 3 s fetch: the model unloaded and the request was a 400 "projector is disposed".
    expect((await postJson(`${srv.url}/api/chat`, { model: '', stream: false, keep_alive: '1s', messages: [{ role: 'user', content: 'hi' }], options: { num_predict: 1 } })).status).toBe(200);
    const r = await postJson(`${srv.url}/v1/chat/completions`, withImage(`${imagesUrl}/late.png`));
    expect([r.status, r.json.error]).toEqual([200, undefined]);
    expect(r.json.choices[0].message.content).toBe((await openai.chat.completions.create(withImage(red))).choices[0].message.content);
    // Back to the server's default keep_alive for the tests after this one.
    expect((await postJson(`${srv.url}/api/chat`, { model: '', stream: false, keep_alive: -1, messages: [{ role: 'user', content: 'hi' }], options: { num_predict: 1 } })).status).toBe(200);
  });

  it('a corrupt image is a 400 in the spec error shape, and the server goes on', async () => {
    const r = await postJson(`${srv.url}/v1/chat/completions`, withImage(`data:image/png;base64,${Buffer.from('not a picture at all').toString('base64')}`));
    expect(r.status).toBe(400);
    expect(r.json.error.type).toBe('Bad Request');
    expect(r.json.error.message).toMatch(/^image 1 cannot be decoded/);
    const ok = await openai.chat.completions.create(withImage(red));
    expect(ok.usage!.prompt_tokens).toBeGreaterThan(IMAGE_POSITIONS);
    // Refused from its header, before decoding: a 420 KB PNG of 12000 x 12000 decoded to 432 MB.
    const huge = png(1, 1, () => [0, 0, 0]);
    huge.writeUInt32BE(12000, 16);
    huge.writeUInt32BE(12000, 20);
    const refused = await postJson(`${srv.url}/v1/chat/completions`, withImage(huge));
    expect([refused.status, refused.json.error]).toEqual([400, { message: 'image 1 is 12000x12000 pixels; images are taken up to 16777216 pixels (4096x4096)', type: 'Bad Request' }]);
  });

  it('/api/chat and /api/generate take images (ollama client)', async () => {
    const ollama = new Ollama({ host: srv.url });
    const chat = await ollama.chat({ model: '', stream: false, options: { temperature: 0, num_predict: 8 }, messages: [{ role: 'user', content: QUESTION, images: [red.toString('base64')] }] });
    expect(chat.prompt_eval_count).toBeGreaterThan(IMAGE_POSITIONS);
    const gen = await ollama.generate({ model: '', stream: false, prompt: QUESTION, images: [new Uint8Array(checks)], options: { temperature: 0, num_predict: 8 } });
    expect(gen.prompt_eval_count).toBeGreaterThan(IMAGE_POSITIONS);
  });

  it('messages dialect: base64 and url image blocks (@anthropic-ai/sdk)', async () => {
    // greedyFetch: temperature 0 (this SDK version has no such field).
    const client = new Anthropic({ baseURL: srv.url, apiKey: 'x', fetch: greedyFetch });
    const ask = (source: Anthropic.ImageBlockParam['source']) =>
      client.messages.create({ model: '', max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'image', source }, { type: 'text', text: QUESTION }] }] });
    const b64 = await ask({ type: 'base64', media_type: 'image/png', data: red.toString('base64') });
    expect(b64.usage.input_tokens).toBeGreaterThan(IMAGE_POSITIONS);
    const url = await ask({ type: 'url', url: `${imagesUrl}/red.png` });
    expect(url.content).toEqual(b64.content);
  });

  it('images count in count_tokens, and svc_session (a context matched by tokens) refuses them', async () => {
    const count = await postJson(`${srv.url}/v1/messages/count_tokens`, {
      model: '',
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: red.toString('base64') } }, { type: 'text', text: QUESTION }] }],
    });
    expect(count.status).toBe(200);
    expect(count.json.input_tokens).toBeGreaterThan(IMAGE_POSITIONS);
    const session = await postJson(`${srv.url}/v1/chat/completions`, { ...withImage(red), svc_session: 'pictures' });
    expect(session.status).toBe(400);
    expect(session.json.error.message).toBe('svc_session contexts hold text only: send images without svc_session');
  });

  it('/v1/responses: input_image', async () => {
    const r = await openai.responses.create({
      model: '',
      max_output_tokens: 8,
      temperature: 0,
      input: [{ role: 'user', content: [{ type: 'input_text', text: QUESTION }, { type: 'input_image', image_url: dataUrl(red), detail: 'auto' }] }],
    });
    expect(r.usage!.input_tokens).toBeGreaterThan(IMAGE_POSITIONS);
  });
});

/** `seer:latest` in a local-runner store: the vision-tiny weights with the test projector as its projector layer. */
function writeSeer(ollamaDir: string): void {
  writeOllamaModel(ollamaDir, 'seer:latest', [
    { mediaType: 'application/vnd.ollama.image.model', data: readFileSync(syntheticModel('vision-tiny')) },
    { mediaType: 'application/vnd.ollama.image.projector', data: readFileSync(MMPROJ) },
  ]);
}

describe("a store model with a projector layer (the local runner's store)", () => {
  let srv: RunningServer;
  const ollamaDir = mkdtempSync(join(tmpdir(), 'svc-vision-ollama-'));

  beforeAll(async () => {
    writeSeer(ollamaDir);
    writeOllamaModel(ollamaDir, 'plain:latest', [{ mediaType: 'application/vnd.ollama.image.model', data: readFileSync(syntheticModel('qwen2.5-tiny')) }]);
    srv = await startServer(['-m', 'seer', '-threads', '1', '-concurrency', '2'], { env: { OLLAMA_MODELS: ollamaDir } });
  });
  afterAll(async () => {
    await srv?.stop();
    rmSync(ollamaDir, { recursive: true, force: true });
  });

  it('loads the projector with the weights: health, show and route say vision, and images are read', async () => {
    const h = (await (await fetch(`${srv.url}/healthz`)).json()) as { vision: boolean };
    expect(h.vision).toBe(true);
    const ollama = new Ollama({ host: srv.url });
    expect((await ollama.show({ model: 'seer' })).capabilities).toContain('vision');
    expect((await ollama.show({ model: 'plain' })).capabilities).not.toContain('vision');
    const route = await postJson(`${srv.url}/v1/route`, { text: 'what is in this photo?', has_image: true });
    expect(route.status).toBe(200);
    expect(route.json.candidates.find((c: { model: string }) => c.model.startsWith('seer')).vision).toBe(true);
    const r = await ollama.chat({ model: 'seer', stream: false, options: { temperature: 0, num_predict: 4 }, messages: [{ role: 'user', content: QUESTION, images: [red.toString('base64')] }] });
    expect(r.prompt_eval_count).toBeGreaterThan(IMAGE_POSITIONS);
    // The model without one keeps the old refusal.
    const plain = await postJson(`${srv.url}/v1/chat/completions`, { model: 'plain', ...withImageBody(red) });
    expect(plain.status).toBe(400);
    expect(plain.json.error.message).toBe('this model has no vision projector; it cannot read image parts');
  });

  it('-mmproj for a store model of another width stops the server when it loads (exit 2)', async () => {
    const proc = spawn(process.execPath, [join(ROOT, 'bin', 'svc.js'), '-addr', `127.0.0.1:${await freePort()}`, '-m', 'plain', '-mmproj', MMPROJ, '-threads', '1'], { env: { ...process.env, OLLAMA_MODELS: ollamaDir }, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    proc.stderr.on('data', (d) => (err += d));
    const code = await new Promise<number | null>((resolve) => proc.on('exit', resolve));
    expect(code).toBe(2);
    expect(err).toContain('flag -mmproj: cannot load the vision projector');
    expect(err).toContain('mismatch between text model (n_embd = 64) and mmproj (n_embd = 128)');
  });
});

function withImageBody(img: Buffer) {
  return { max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'text', text: QUESTION }, { type: 'image_url', image_url: { url: dataUrl(img) } }] }] };
}

describe('-mmproj refused at startup (exit 2)', () => {
  let port = 0;
  beforeAll(async () => {
    port = await freePort();
  });
  const boot = (args: string[]) => spawnSync(process.execPath, [join(ROOT, 'bin', 'svc.js'), '-addr', `127.0.0.1:${port}`, ...args], { encoding: 'utf8', timeout: 60_000 });

  it('a -batch-size whose micro-batch cannot hold one image (decoded in one); the smallest that can boots with vision', async () => {
    // It booted with vision: true, then answered every image 400 "raise -batch-size".
    const r = boot(['-m', syntheticModel('vision-tiny'), '-mmproj', MMPROJ, '-batch-size', '128', '-threads', '1']);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(
      `svc: flag -batch-size: one image of this projector takes ${IMAGE_POSITIONS} positions, decoded in one micro-batch: -batch-size must be at least ${IMAGE_POSITIONS} (it is 128)\n`,
    );
    const srv = await startServer(['-m', syntheticModel('vision-tiny'), '-mmproj', MMPROJ, '-batch-size', String(IMAGE_POSITIONS), '-threads', '1', '-concurrency', '2']);
    try {
      expect(((await (await fetch(`${srv.url}/healthz`)).json()) as { vision: boolean }).vision).toBe(true);
      const img = await postJson(`${srv.url}/v1/chat/completions`, withImageBody(red));
      expect([img.status, img.json.usage.prompt_tokens > IMAGE_POSITIONS]).toEqual([200, true]);
    } finally {
      await srv.stop();
    }
  });

  it('a file that is no projector', () => {
    const r = boot(['-m', syntheticModel('vision-tiny'), '-mmproj', fixtureModel('stories260K.gguf')]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('flag -mmproj:');
    expect(r.stderr).toContain('is not a vision projector');
  });

  it("a projector of another model's width", () => {
    const r = boot(['-m', syntheticModel('qwen2.5-tiny'), '-mmproj', MMPROJ]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('flag -mmproj:');
    expect(r.stderr).toContain('128-wide embeddings');
  });

  it('no such file, and no -m', () => {
    expect(boot(['-m', syntheticModel('vision-tiny'), '-mmproj', '/nonexistent/mmproj.gguf']).status).toBe(2);
    const r = boot(['-mmproj', MMPROJ]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('flag -mmproj needs -m');
  });
});

describe("a store model whose projector's images do not fit -batch-size", () => {
  let srv: RunningServer;
  const ollamaDir = mkdtempSync(join(tmpdir(), 'svc-vision-ollama-'));
  beforeAll(async () => {
    writeSeer(ollamaDir);
    srv = await startServer(['-m', 'seer', '-batch-size', '128', '-threads', '1', '-concurrency', '2'], { env: { OLLAMA_MODELS: ollamaDir } });
  });
  afterAll(async () => {
    await srv?.stop();
    rmSync(ollamaDir, { recursive: true, force: true });
  });

  it('loads without vision (no exit): text answers, an image is a 400 naming -batch-size and the size it needs', async () => {
    expect(((await (await fetch(`${srv.url}/healthz`)).json()) as { vision: boolean }).vision).toBe(false);
    const text = await postJson(`${srv.url}/v1/chat/completions`, { max_tokens: 4, messages: [{ role: 'user', content: QUESTION }] });
    expect(text.status).toBe(200);
    const img = await postJson(`${srv.url}/v1/chat/completions`, withImageBody(red));
    expect([img.status, img.json.error]).toEqual([
      400,
      {
        message: `seer:latest's vision projector was not loaded: one image of this projector takes ${IMAGE_POSITIONS} positions, decoded in one micro-batch: -batch-size must be at least ${IMAGE_POSITIONS} (it is 128)`,
        type: 'Bad Request',
      },
    ]);
  });
});
