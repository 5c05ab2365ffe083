import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { createServer, Server } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixtureModel, syntheticModel } from './helpers/fixtures';
import { dataUrl, png } from './helpers/images';
import { pdf, video } from './helpers/media';
import { freePort, postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(300_000);

/**
 * Video and PDF parts, and pictures thinned to what a request reads. Videos are read by ffmpeg,
 * PDFs by poppler (installed by scripts/install-system-deps.sh and in the images); the same
 * gemma3 projector as vision.e2e-spec takes 256 positions a picture, 4096 a request.
 */
const MMPROJ = fixtureModel('mmproj-tinygemma3.gguf');
const IMAGE_POSITIONS = 256;
const LIMIT = 4096;
const red = png(32, 32, () => [230, 20, 20]);
const videoUrl = (b: Buffer, mime = 'video/mp4') => `data:${mime};base64,${b.toString('base64')}`;
const pdfData = (b: Buffer) => `data:application/pdf;base64,${b.toString('base64')}`;

type Part = Record<string, unknown>;
const ask = (parts: Part[], extra: Record<string, unknown> = {}) => ({
  model: '',
  temperature: 0,
  max_tokens: 8,
  messages: [{ role: 'user', content: [...parts, { type: 'text', text: 'What is this?' }] }],
  ...extra,
});
const image = (url: string): Part => ({ type: 'image_url', image_url: { url } });

describe('video and PDF parts, and thinning (vision model)', () => {
  let srv: RunningServer;
  let host: Server;
  let hostUrl: string;
  const clip = video(5);
  const long = video(30);

  beforeAll(async () => {
    srv = await startServer(['-m', syntheticModel('vision-tiny'), '-mmproj', MMPROJ, '-threads', '1', '-concurrency', '2']);
    host = createServer((req, res) => {
      if (req.url === '/clip.mp4') return void res.writeHead(200, { 'content-type': 'video/mp4' }).end(clip);
      if (req.url === '/doc.pdf') return void res.writeHead(200, { 'content-type': 'application/pdf' }).end(pdf(['Hello from a URL']));
      res.writeHead(404).end();
    });
    const port = await freePort();
    await new Promise<void>((r) => host.listen(port, '127.0.0.1', r));
    hostUrl = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    host?.closeAllConnections();
    host?.close();
    await srv?.stop();
  });
  const chat = (body: unknown) => postJson(`${srv.url}/v1/chat/completions`, body);

  it('a 5 s video is read as five frames: the positions of five images, nothing thinned', async () => {
    const r = await chat(ask([{ type: 'video_url', video_url: { url: videoUrl(clip) } }]));
    expect([r.status, r.json.error]).toEqual([200, undefined]);
    const five = await chat(ask(Array.from({ length: 5 }, () => image(dataUrl(red)))));
    expect(r.json.usage.prompt_tokens).toBe(five.json.usage.prompt_tokens);
    expect(r.json.usage.prompt_tokens).toBeGreaterThan(5 * IMAGE_POSITIONS);
    expect(r.headers.get('x-svc-media')).toBeNull();
    expect(r.json.svc_media).toBeUndefined();
    // The other spellings of a video: {type: video} with data, and an http URL.
    const data = await chat(ask([{ type: 'video', video: { data: clip.toString('base64') } }]));
    const byUrl = await chat(ask([{ type: 'video_url', video_url: { url: `${hostUrl}/clip.mp4` } }]));
    expect([data.status, data.json.usage?.prompt_tokens]).toEqual([200, r.json.usage.prompt_tokens]);
    expect([byUrl.status, byUrl.json.usage?.prompt_tokens]).toEqual([200, r.json.usage.prompt_tokens]);
  });

  it('a webm video is read too, and an animated GIF under its own type', async () => {
    const r = await chat(ask([{ type: 'video_url', video_url: { url: videoUrl(video(2, { format: 'webm' }), 'video/webm') } }]));
    expect([r.status, r.json.error]).toEqual([200, undefined]);
    expect(r.json.usage.prompt_tokens).toBeGreaterThan(2 * IMAGE_POSITIONS);
    const gif = await chat(ask([{ type: 'video_url', video_url: { url: videoUrl(video(2, { format: 'gif' }), 'image/gif') } }]));
    expect([gif.status, gif.json.usage?.prompt_tokens]).toEqual([200, r.json.usage.prompt_tokens]);
  });

  it('count_tokens thins as a generation of the same body does, and says so', async () => {
    const blocks = Array.from({ length: 16 }, () => ({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: red.toString('base64') } }));
    for (const max of [8, undefined]) {
      const body = { model: '', ...(max ? { max_tokens: max } : {}), messages: [{ role: 'user', content: [...blocks, { type: 'text', text: 'hi' }] }] };
      const count = await postJson(`${srv.url}/v1/messages/count_tokens`, body);
      // Generation with the dialect's default max_tokens (1024) when the body has none.
      const gen = await postJson(`${srv.url}/v1/messages`, { max_tokens: 1024, ...body });
      expect([count.status, gen.status]).toEqual([200, 200]);
      expect(count.json.input_tokens).toBe(gen.json.usage.input_tokens + (gen.json.usage.cache_read_input_tokens ?? 0));
      expect(count.headers.get('x-svc-media')).toBe(gen.headers.get('x-svc-media'));
      expect(count.headers.get('x-svc-media')).toMatch(/^images=\d+\/16$/);
    }
  });

  it('a 30 s video is thinned to what fits the request, and says so in X-Svc-Media and svc_media', async () => {
    const r = await chat(ask([{ type: 'video_url', video_url: { url: videoUrl(long) } }], { max_tokens: 100 }));
    expect([r.status, r.json.error]).toEqual([200, undefined]);
    const m = /^video_frames=(\d+)\/30$/.exec(r.headers.get('x-svc-media') ?? '');
    expect(m).not.toBeNull();
    const kept = Number(m![1]);
    // At most 16 frames a video; fewer when 16 x 256 positions and the answer's room overflow 4096.
    expect(kept).toBeLessThanOrEqual(15);
    expect(kept).toBeGreaterThanOrEqual(12);
    expect(r.json.svc_media).toEqual({ video_frames: { received: 30, kept } });
    expect(r.json.usage.prompt_tokens).toBeGreaterThan(kept * IMAGE_POSITIONS);
    expect(r.json.usage.prompt_tokens + 100).toBeLessThanOrEqual(LIMIT);
    // A stream has no body field before its first frame: the header says it there.
    const s = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ask([{ type: 'video_url', video_url: { url: videoUrl(long) } }], { max_tokens: 100, stream: true })) });
    expect(s.status).toBe(200);
    expect(s.headers.get('x-svc-media')).toBe(`video_frames=${kept}/30`);
    expect(await s.text()).toContain('data: [DONE]');
  });

  it('20 images: the earliest are left out unfetched (16 a request), then more until the prompt fits', async () => {
    // The first four cannot be fetched: left out by the count, they are never asked for.
    const parts = [...Array.from({ length: 4 }, () => image(`${hostUrl}/missing.png`)), ...Array.from({ length: 16 }, () => image(dataUrl(red)))];
    const r = await chat(ask(parts));
    expect([r.status, r.json.error]).toEqual([200, undefined]);
    const m = /^images=(\d+)\/20$/.exec(r.headers.get('x-svc-media') ?? '');
    expect(m).not.toBeNull();
    const kept = Number(m![1]);
    expect(kept).toBe(15);
    expect(r.json.svc_media).toEqual({ images: { received: 20, kept } });
    expect(r.json.usage.prompt_tokens + 8).toBeLessThanOrEqual(LIMIT);
    // The messages and local-runner routes say it in the header too.
    const messages = await postJson(`${srv.url}/v1/messages`, {
      model: '',
      max_tokens: 8,
      messages: [{ role: 'user', content: [...Array.from({ length: 20 }, () => ({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: red.toString('base64') } })), { type: 'text', text: 'hi' }] }],
    });
    expect([messages.status, messages.headers.get('x-svc-media')]).toEqual([200, 'images=15/20']);
    const runner = await postJson(`${srv.url}/api/chat`, { model: '', stream: false, options: { num_predict: 8 }, messages: [{ role: 'user', content: 'hi', images: Array.from({ length: 20 }, () => red.toString('base64')) }] });
    expect([runner.status, runner.headers.get('x-svc-media')]).toEqual([200, 'images=15/20']);
  });

  it('a PDF is read as its text, and a page without text is drawn as an image', async () => {
    const text = await chat(ask([{ type: 'file', file: { file_data: pdfData(pdf(['Hello PDF world'])), filename: 'a.pdf' } }]));
    expect([text.status, text.json.error]).toEqual([200, undefined]);
    expect(text.json.usage.prompt_tokens).toBeLessThan(IMAGE_POSITIONS);
    const scanned = await chat(ask([{ type: 'file', file: { file_data: pdfData(pdf(['Hello PDF world', null])), filename: 'a.pdf' } }]));
    expect([scanned.status, scanned.json.error]).toEqual([200, undefined]);
    expect(scanned.json.usage.prompt_tokens - text.json.usage.prompt_tokens).toBeGreaterThan(IMAGE_POSITIONS);
    const byUrl = await postJson(`${srv.url}/v1/responses`, { model: '', max_output_tokens: 8, input: [{ role: 'user', content: [{ type: 'input_file', file_url: `${hostUrl}/doc.pdf`, filename: 'doc.pdf' }, { type: 'input_text', text: 'Summarize.' }] }] });
    expect([byUrl.status, byUrl.json.output[0].type]).toEqual([200, 'message']);
    const bare = await postJson(`${srv.url}/v1/responses`, { model: '', max_output_tokens: 8, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Summarize.' }] }] });
    // "[PDF doc.pdf, 1 page]" and "Hello from a URL" came in front of the question.
    expect(byUrl.json.usage.input_tokens - bare.json.usage.input_tokens).toBeGreaterThan(8);
  });

  it('what cannot be read is a 400 naming the part, and the server goes on', async () => {
    const cases: Array<[Part, RegExp]> = [
      [{ type: 'video_url', video_url: { url: videoUrl(Buffer.from('not a video at all')) } }, /^video 1 cannot be decoded: /],
      [{ type: 'video_url', video_url: { url: videoUrl(video(1, { audioOnly: true, format: 'webm' }), 'video/webm') } }, /^video 1 has no video stream$/],
      // A playlist names other files: ffmpeg is not let open it (it could read the server's files).
      [{ type: 'video_url', video_url: { url: videoUrl(Buffer.from('#EXTM3U\n#EXTINF:1,\nfile:///etc/hostname\n')) } }, /^video 1 cannot be decoded: /],
      [{ type: 'video_url', video_url: { url: `${hostUrl}/missing.mp4` } }, /^video 1: http:\/\/127\.0\.0\.1:\d+\/missing\.mp4 could not be fetched$/],
      [{ type: 'file', file: { file_data: pdfData(Buffer.from('plain words, not a PDF')) } }, /^file 1 is not a PDF \(no %PDF- header\)$/],
      [{ type: 'file', file: { file_data: pdfData(Buffer.from('%PDF-1.4\nbroken')) } }, /^file 1 cannot be decoded: /],
      [{ type: 'file', file: { file_data: pdfData(pdf([])) } }, /^file 1 has no pages$/],
      // Past the pixels an image may have: an 8000x8000 video of 424 KB took ffmpeg to 441 MiB.
      [{ type: 'video_url', video_url: { url: videoUrl(video(1, { size: '4200x4100', plain: true, format: 'mov' }), 'video/quicktime') } }, /^video 1 is 4200x4100 pixels/],
    ];
    for (const [part, message] of cases) {
      const r = await chat(ask([part]));
      expect([r.status, r.json.error?.type]).toEqual([400, 'Bad Request']);
      expect(r.json.error.message).toMatch(message);
    }
    const ok = await chat(ask([image(dataUrl(red))]));
    expect(ok.status).toBe(200);
  });
});

describe('temporary files for video (TMPDIR)', () => {
  let srv: RunningServer | undefined;
  afterEach(async () => {
    await srv?.stop();
    srv = undefined;
  });
  const ask = (part: unknown) => ({ messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, part] }], max_tokens: 2 });
  const clip = { type: 'video_url', video_url: { url: `data:video/mp4;base64,${video(2).toString('base64')}` } };
  const doc = { type: 'file', file: { filename: 'a.pdf', file_data: `data:application/pdf;base64,${pdf(['Hello']).toString('base64')}` } };

  it('a TMPDIR that does not exist yet is made at boot (deploy/k8s sets /data/tmp on a fresh volume)', async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'svc-tmp-')), 'fresh', 'tmp');
    srv = await startServer(['-m', syntheticModel('vision-tiny'), '-mmproj', MMPROJ, '-threads', '1', '-concurrency', '2'], { env: { TMPDIR: dir } });
    const r = await postJson(`${srv.url}/v1/chat/completions`, ask(clip));
    expect([r.status, r.json.error]).toEqual([200, undefined]);
  });

  it('a video whose temporary file cannot be made fails alone: later videos and PDFs are still served (they waited forever)', async () => {
    // A TMPDIR under a file: nothing can be made there.
    const file = join(mkdtempSync(join(tmpdir(), 'svc-tmp-')), 'not-a-dir');
    writeFileSync(file, 'x');
    srv = await startServer(['-m', syntheticModel('vision-tiny'), '-mmproj', MMPROJ, '-threads', '1', '-concurrency', '2'], { env: { TMPDIR: join(file, 'tmp') } });
    // More failures than media turns (at most 4): each used to keep its turn.
    for (let i = 0; i < 5; i++) expect((await postJson(`${srv.url}/v1/chat/completions`, ask(clip))).status).toBe(500);
    const r = await Promise.race([postJson(`${srv.url}/v1/chat/completions`, ask(doc)), new Promise<never>((_, no) => setTimeout(() => no(new Error('the PDF request hung')), 20_000))]);
    expect([r.status, r.json.error]).toEqual([200, undefined]);
  });
});

describe('PDF parts on a model without a projector', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', syntheticModel('qwen2.5-tiny'), '-threads', '1', '-concurrency', '2']);
  });
  afterAll(async () => srv?.stop());

  it('reads the text: counted as the same text sent as text (@anthropic-ai/sdk document blocks, count_tokens)', async () => {
    const client = new Anthropic({ baseURL: srv.url, apiKey: 'x' });
    const doc = pdf(['First page words', 'Second page words', null]);
    const asPdf = await client.messages.countTokens({
      model: '',
      messages: [{ role: 'user', content: [{ type: 'document', title: 'notes.pdf', source: { type: 'base64', media_type: 'application/pdf', data: doc.toString('base64') } }, { type: 'text', text: 'Summarize.' }] }],
    });
    const asText = await client.messages.countTokens({
      model: '',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: '[PDF notes.pdf, 3 pages]' },
            { type: 'text', text: '\n[page 1]\nFirst page words' },
            { type: 'text', text: '\n[page 2]\nSecond page words' },
            { type: 'text', text: '\n[page 3]\n(no text on this page)' },
            { type: 'text', text: 'Summarize.' },
          ],
        },
      ],
    });
    expect(asPdf.input_tokens).toBe(asText.input_tokens);
    const made = await client.messages.create({ model: '', max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: doc.toString('base64') } }] }] });
    expect(made.usage.input_tokens).toBeGreaterThan(10);
  });

  it('a context made of messages reads a PDF as chat does: the chat turn on it finds what it holds', async () => {
    const messages = [{ role: 'user', content: [{ type: 'file', file: { file_data: pdfData(pdf(['Minutes of the meeting'])), filename: 'm.pdf' } }, { type: 'text', text: 'Summarize.' }] }];
    const made = await postJson(`${srv.url}/v1/contexts`, { messages });
    expect([made.status, made.json.error]).toEqual([201, undefined]);
    const turn = await postJson(`${srv.url}/v1/chat/completions`, { model: '', max_tokens: 4, temperature: 0, messages, svc_session: made.json.id });
    expect([turn.status, turn.json.error]).toEqual([200, undefined]);
    expect(turn.json.usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(made.json.tokens - 8);
  });

  it('chat file parts through the official OpenAI client; a video still needs a projector', async () => {
    const openai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
    const r = await openai.chat.completions.create({ model: '', max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'file', file: { file_data: pdfData(pdf(['Quarterly numbers'])), filename: 'q.pdf' } }, { type: 'text', text: 'Summarize.' }] }] });
    expect(r.usage!.prompt_tokens).toBeGreaterThan(10);
    const v = await postJson(`${srv.url}/v1/chat/completions`, ask([{ type: 'video_url', video_url: { url: videoUrl(video(1)) } }]));
    expect([v.status, v.json.error.message]).toEqual([400, 'this model has no vision projector; it cannot read video parts']);
  });
});
