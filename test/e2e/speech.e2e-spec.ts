import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { fixtureModel, ROOT, STORIES, syntheticModel } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

const CLI = join(ROOT, 'build', 'native', 'whisper', 'ref', 'whisper-cli');
const ADDON = join(ROOT, 'build', 'native', 'whisper', 'svc_whisper.node');

type Sample = { bits: 8 | 16 | 24 | 32; float?: boolean; extensible?: boolean };

/** Seeded noise plus a gliding tone, as a WAV file (16-bit PCM at 16 kHz mono unless asked otherwise). */
function wav(seconds: number, opts: { rate?: number; channels?: number; seed?: number } & Partial<Sample> = {}): Buffer {
  const rate = opts.rate ?? 16000;
  const channels = opts.channels ?? 1;
  const bits = opts.bits ?? 16;
  const width = bits / 8;
  let s = opts.seed ?? 1;
  const rand = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648) * 2 - 1;
  const n = Math.floor(seconds * rate);
  const data = Buffer.alloc(n * channels * width);
  for (let i = 0; i < n; i++) {
    const t = i / rate;
    const v = Math.max(-1, Math.min(1, 0.3 * Math.sin(2 * Math.PI * (200 + 150 * t) * t) + 0.05 * rand()));
    for (let c = 0; c < channels; c++) {
      const o = (i * channels + c) * width;
      if (opts.float) data.writeFloatLE(v, o);
      else if (bits === 8) data[o] = Math.round(v * 127) + 128;
      else if (bits === 16) data.writeInt16LE(Math.round(v * 32767), o);
      else if (bits === 24) data.writeIntLE(Math.round(v * 8388607), o, 3);
      else data.writeInt32LE(Math.round(v * 2147483647), o);
    }
  }
  const fmt = Buffer.alloc(opts.extensible ? 40 : 16);
  const code = opts.float ? 3 : 1;
  fmt.writeUInt16LE(opts.extensible ? 0xfffe : code, 0);
  fmt.writeUInt16LE(channels, 2);
  fmt.writeUInt32LE(rate, 4);
  fmt.writeUInt32LE(rate * channels * width, 8);
  fmt.writeUInt16LE(channels * width, 12);
  fmt.writeUInt16LE(bits, 14);
  if (opts.extensible) {
    fmt.writeUInt16LE(22, 16);
    fmt.writeUInt16LE(bits, 18);
    fmt.writeUInt32LE(channels === 1 ? 4 : 3, 20);
    // KSDATAFORMAT_SUBTYPE_PCM / _IEEE_FLOAT: the format code, then the fixed GUID tail.
    Buffer.from([code, 0, 0, 0, 0, 0, 0x10, 0, 0x80, 0, 0, 0xaa, 0, 0x38, 0x9b, 0x71]).copy(fmt, 24);
  }
  const chunk = (id: string, body: Buffer) => Buffer.concat([Buffer.from(id, 'latin1'), Buffer.from(Uint32Array.of(body.length).buffer), body]);
  const riff = Buffer.concat([Buffer.from('WAVE', 'latin1'), chunk('fmt ', fmt), chunk('data', data)]);
  return Buffer.concat([Buffer.from('RIFF', 'latin1'), Buffer.from(Uint32Array.of(riff.length).buffer), riff]);
}

/** The WAV with its fmt chunk's body edited (it starts at byte 20 in wav()'s files). */
function withFmt(file: Buffer, edit: (fmt: Buffer) => void): Buffer {
  const copy = Buffer.from(file);
  edit(copy.subarray(20, 36));
  return copy;
}

interface CliSegment {
  offsets: { from: number; to: number };
  text: string;
}

/** whisper.cpp's own whisper-cli, from the same tree, on the same file: greedy, temperature 0, no fallback. */
function reference(model: string, file: string, extra: string[] = []): CliSegment[] {
  const out = join(mkdtempSync(join(tmpdir(), 'svc-whisper-ref-')), 'out');
  execFileSync(CLI, ['-m', model, '-f', file, '-t', '1', '-bs', '1', '-bo', '1', '-tp', '0', '-nf', '-np', '-oj', '-of', out, ...extra], { stdio: 'pipe' });
  return (JSON.parse(readFileSync(`${out}.json`, 'utf8')) as { transcription: CliSegment[] }).transcription;
}

describe('speech-to-text (-whisper, the real server process)', () => {
  let srv: RunningServer;
  let model: string;
  let dir: string;
  let client: OpenAI;

  beforeAll(async () => {
    model = syntheticModel('whisper-tiny');
    dir = mkdtempSync(join(tmpdir(), 'svc-audio-'));
    srv = await startServer(['-m', fixtureModel(STORIES), '-whisper', '-whisper-model', model, '-threads', '1']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('transcribes as whisper.cpp\'s own whisper-cli does, through the official client, in every response format', async () => {
    const audio = wav(3);
    const file = join(dir, 'a.wav');
    writeFileSync(file, audio);
    const ref = reference(model, file, ['-l', 'en']);
    expect(ref.length).toBeGreaterThan(0);
    const refText = ref.map((s) => s.text).join('').trim();

    const plain = await client.audio.transcriptions.create({ file: await toFile(audio, 'a.wav'), model: 'whisper-1', language: 'en' });
    expect(plain.text).toBe(refText);

    const verbose = await client.audio.transcriptions.create({ file: await toFile(audio, 'a.wav'), model: 'whisper-1', language: 'en', response_format: 'verbose_json' });
    expect(verbose).toMatchObject({ task: 'transcribe', language: 'english', duration: 3, text: refText });
    // whisper-cli prints the times as whisper.cpp read them; the server keeps them inside the audio.
    const within = (ms: number) => Math.min(3, Math.max(0, ms / 1000));
    expect(verbose.segments!.map((s) => [s.start, s.end, s.text])).toEqual(ref.map((s) => [within(s.offsets.from), within(s.offsets.to), s.text]));
    for (const s of verbose.segments!) {
      expect(s).toMatchObject({ temperature: 0, id: expect.any(Number), seek: 0 });
      expect(s.avg_logprob).toBeLessThanOrEqual(0);
      expect(s.no_speech_prob).toBeGreaterThanOrEqual(0);
    }

    const srt = (await client.audio.transcriptions.create({ file: await toFile(audio, 'a.wav'), model: 'whisper-1', language: 'en', response_format: 'srt' })) as unknown as string;
    expect(srt.startsWith('1\n00:00:00,000 --> ')).toBe(true);
    expect(srt).toContain(ref[0].text.trim());
    const vtt = (await client.audio.transcriptions.create({ file: await toFile(audio, 'a.wav'), model: 'whisper-1', language: 'en', response_format: 'vtt' })) as unknown as string;
    expect(vtt.startsWith('WEBVTT\n\n00:00:00.000 --> ')).toBe(true);
    const text = (await client.audio.transcriptions.create({ file: await toFile(audio, 'a.wav'), model: 'whisper-1', language: 'en', response_format: 'text' })) as unknown as string;
    expect(text.trim()).toBe(refText);
  });

  it('translates as whisper-cli -tr does; a WAV body with query options works too and reports its time', async () => {
    const audio = wav(2, { seed: 7 });
    const file = join(dir, 'b.wav');
    writeFileSync(file, audio);
    const ref = reference(model, file, ['-l', 'auto', '-tr']);
    const tr = await client.audio.translations.create({ file: await toFile(audio, 'b.wav'), model: 'whisper-1' });
    expect(tr.text).toBe(ref.map((s) => s.text).join('').trim());
    // A translation's language is the output's, English, whatever was spoken (it named the detected one).
    const verbose = await client.audio.translations.create({ file: await toFile(audio, 'b.wav'), model: 'whisper-1', response_format: 'verbose_json' });
    expect([(verbose as unknown as { language: string }).language, verbose.text]).toEqual(['english', tr.text]);

    const raw = await fetch(`${srv.url}/v1/audio/transcriptions?language=en&response_format=json`, { method: 'POST', headers: { 'content-type': 'audio/wav' }, body: audio });
    expect(raw.status).toBe(200);
    expect(raw.headers.get('x-svc-transcribe-ms')).toMatch(/^\d+(\.\d+)?$/);
    const body = (await raw.json()) as { text: string; usage: unknown };
    // A parameter given twice is a 400, as on every route's query (the first was used).
    const twice = await fetch(`${srv.url}/v1/audio/transcriptions?response_format=srt&response_format=json`, { method: 'POST', headers: { 'content-type': 'audio/wav' }, body: audio });
    expect([twice.status, ((await twice.json()) as { error: { message: string } }).error.message]).toEqual([400, 'cannot parse request: the query parameter response_format is given more than once']);
    expect(body.usage).toEqual({ type: 'duration', seconds: 2 });
    expect(body.text).toBe(reference(model, file, ['-l', 'en']).map((s) => s.text).join('').trim());
  });

  it('decodes every WAV layout as whisper-cli does (channels averaged, rates resampled): the same transcripts', async () => {
    const layouts: Array<[string, Buffer]> = [
      ['stereo 44.1 kHz 16-bit', wav(2.5, { rate: 44100, channels: 2, seed: 3 })],
      ['8-bit 8 kHz', wav(2, { rate: 8000, bits: 8, seed: 4 })],
      ['24-bit 48 kHz', wav(2, { rate: 48000, bits: 24, seed: 5 })],
      ['32-bit float, extensible, 6 channels', wav(1.5, { rate: 22050, channels: 6, bits: 32, float: true, extensible: true, seed: 6 })],
    ];
    for (const [name, audio] of layouts) {
      const file = join(dir, 'layout.wav');
      writeFileSync(file, audio);
      const ref = reference(model, file, ['-l', 'en']);
      const r = await client.audio.transcriptions.create({ file: await toFile(audio, 'x.wav'), model: 'whisper-1', language: 'en', response_format: 'verbose_json', timestamp_granularities: ['segment'] });
      expect({ name, text: r.text }).toEqual({ name, text: ref.map((x) => x.text).join('').trim() });
    }
  });

  it('reads a form of many fields in linear time (each repeated field copied its list: 60,000 held every route for 20 s)', async () => {
    const boundary = 'XyZb';
    const one = `--${boundary}\r\nContent-Disposition: form-data; name="a"\r\n\r\nb\r\n`;
    const body = one.repeat(100_000) + `--${boundary}--\r\n`;
    const t0 = Date.now();
    const r = await fetch(`${srv.url}/v1/audio/transcriptions`, { method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${boundary}` }, body });
    expect([r.status, ((await r.json()) as { error: { message: string } }).error.message]).toEqual([400, 'file is required']);
    // Linear: about a second on a loaded 2-core machine; quadratic, over a minute.
    expect(Date.now() - t0).toBeLessThan(20_000);
  });

  it('takes a browser\'s mixed-case multipart boundary, a blip of audio, and a prompt of any length', async () => {
    const audio = wav(1, { seed: 8 });
    const boundary = '----WebKitFormBoundaryAbCdEfGh12';
    const part = (name: string, value: string) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
    const body = Buffer.concat([
      Buffer.from(part('model', 'whisper-1') + part('prompt', 'x'.repeat(30000)) + `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n`),
      audio,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    for (const type of [`multipart/form-data; boundary=${boundary}`, `Multipart/Form-Data; Boundary="${boundary}"`]) {
      const r = await fetch(`${srv.url}/v1/audio/transcriptions`, { method: 'POST', headers: { 'content-type': type }, body });
      expect({ type, status: r.status }).toEqual({ type, status: 200 });
      expect(typeof ((await r.json()) as { text: string }).text).toBe('string');
    }
    // whisper.cpp refuses input shorter than its FFT window: a blip is padded with silence.
    const blip = await client.audio.transcriptions.create({ file: await toFile(wav(0.0001), 'b.wav'), model: 'whisper-1', response_format: 'verbose_json' });
    expect(blip.duration).toBe(0);
    expect((await (await fetch(`${srv.url}/healthz`)).json()) as object).toMatchObject({ status: 'ok' });
  });

  it('answers concurrent requests one after another with the same results, and a chat beside them (both addons in one process)', async () => {
    const audio = wav(2, { seed: 11 });
    const alone = await client.audio.transcriptions.create({ file: await toFile(audio, 'd.wav'), model: 'whisper-1', language: 'en' });
    const [a, b, chat] = await Promise.all([
      client.audio.transcriptions.create({ file: await toFile(audio, 'd.wav'), model: 'whisper-1', language: 'en' }),
      client.audio.transcriptions.create({ file: await toFile(audio, 'd.wav'), model: 'whisper-1', language: 'en' }),
      postJson(`${srv.url}/v1/completions`, { prompt: 'Once upon a time', max_tokens: 12, temperature: 0 }),
    ]);
    expect([a.text, b.text]).toEqual([alone.text, alone.text]);
    expect(chat.json.choices[0].text).toMatch(/^, there was a little girl named Lily\./);
    const health = (await (await fetch(`${srv.url}/healthz`)).json()) as { transcription: string };
    expect(health.transcription).toBe(model.split('/').pop()!.replace(/\.bin$/, ''));
  });

  it('a client that leaves while queued gives its place back at once (16 departed ones made the next live one a 429)', async () => {
    const long = fetch(`${srv.url}/v1/audio/transcriptions?language=en`, { method: 'POST', headers: { 'content-type': 'audio/wav' }, body: wav(600, { seed: 3 }) });
    await new Promise((r) => setTimeout(r, 300));
    const short = wav(1);
    const gone = Array.from({ length: 16 }, () => {
      const ac = new AbortController();
      const req = fetch(`${srv.url}/v1/audio/transcriptions?language=en`, { method: 'POST', headers: { 'content-type': 'audio/wav' }, body: short, signal: ac.signal }).catch(() => undefined);
      setTimeout(() => ac.abort(), 300);
      return req;
    });
    await Promise.all(gone);
    await new Promise((r) => setTimeout(r, 200));
    const live = await fetch(`${srv.url}/v1/audio/transcriptions?language=en`, { method: 'POST', headers: { 'content-type': 'audio/wav' }, body: short });
    expect(live.status).toBe(200);
    expect((await long).status).toBe(200);
  });

  it('refuses what it cannot hear, in the service error shape', async () => {
    const post = (form: FormData) => fetch(`${srv.url}/v1/audio/transcriptions`, { method: 'POST', body: form });
    const form = (fields: Record<string, string>, file?: Buffer) => {
      const f = new FormData();
      for (const [k, v] of Object.entries(fields)) f.append(k, v);
      if (file) f.append('file', new Blob([file]), 'x.wav');
      return f;
    };
    const cases: Array<[FormData, number, string]> = [
      [form({ model: 'whisper-1' }, Buffer.from('ID3\x03\x00 an mp3')), 415, 'not a WAV file: send RIFF/WAVE audio'],
      [form({ model: 'whisper-1' }), 400, 'file is required'],
      [form({ temperature: '0.4' }, wav(1)), 400, 'temperature must be 0 (this server transcribes greedily), got 0.4'],
      [form({ response_format: 'mp3' }, wav(1)), 400, 'response_format must be one of json, text, srt, verbose_json, vtt, got "mp3"'],
      [form({ language: 'xx' }, wav(1)), 400, 'language "xx" is not one whisper knows'],
      [form({ 'timestamp_granularities[]': 'word', response_format: 'verbose_json' }, wav(1)), 400, 'timestamp_granularities word is not supported: segments carry start and end times'],
      [form({ 'timestamp_granularities[]': 'segment' }, wav(1)), 400, 'timestamp_granularities needs response_format verbose_json'],
      [form({}, wav(0)), 400, 'the audio is empty'],
      [form({}, wav(3601, { rate: 1000, bits: 8 })), 400, 'the audio is 3601 s long; one request transcribes at most 3600 s'],
      [form({}, withFmt(wav(1), (f) => f.writeUInt16LE(255, 2))), 400, 'a WAV file of 255 channels is not audio this server reads (at most 254)'],
      [form({}, withFmt(wav(1), (f) => f.writeUInt16LE(0, 12))), 400, 'the WAV fmt chunk says each frame is 0 bytes (block align 0)'],
    ];
    for (const [f, status, message] of cases) {
      const r = await post(f);
      const body = (await r.json()) as { error: { message: string; type: string } };
      expect({ status: r.status, message: body.error.message }).toEqual({ status, message: expect.stringContaining(message) });
    }
    const json = await postJson(`${srv.url}/v1/audio/transcriptions`, { file: 'x' });
    expect(json.status).toBe(400);
    expect(json.json.error.message).toMatch(/^send the audio as multipart\/form-data/);
  });
});

describe('speech-to-text flags and the addon', () => {
  let srv: RunningServer | undefined;
  afterEach(async () => {
    await srv?.stop();
    srv = undefined;
  });

  it('without -whisper the audio routes say how to turn them on; -whisper without a model stops the boot', async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '1']);
    const f = new FormData();
    f.append('file', new Blob([wav(1)]), 'x.wav');
    const r = await fetch(`${srv.url}/v1/audio/transcriptions`, { method: 'POST', body: f });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: { message: string } }).error.message).toBe('speech-to-text is off: start the server with -whisper');
    // The route's 128 MiB upload limit is for a server that hears: this one keeps the 32 MiB of any body.
    const big = await fetch(`${srv.url}/v1/audio/transcriptions`, { method: 'POST', headers: { 'content-type': 'audio/wav' }, body: Buffer.alloc(33 << 20) });
    expect(big.status).toBe(413);
    expect(((await (await fetch(`${srv.url}/healthz`)).json()) as Record<string, unknown>).transcription).toBeUndefined();

    const none = spawnSync(process.execPath, [join(ROOT, 'bin', 'svc.js'), '-m', fixtureModel(STORIES), '-whisper', '-whisper-model', '/nonexistent/ggml-base.bin'], { encoding: 'utf8', timeout: 30_000 });
    expect(none.status).toBe(2);
    expect(none.stderr).toContain('flag -whisper needs a whisper.cpp model: cannot read /nonexistent/ggml-base.bin (ENOENT)');
    // A file whisper.cpp cannot read is the flag's mistake too: status 2 (it was 1).
    const bad = spawnSync(process.execPath, [join(ROOT, 'bin', 'svc.js'), '-m', fixtureModel(STORIES), '-whisper', '-whisper-model', '/etc/hosts', '-addr', '127.0.0.1:0'], { encoding: 'utf8', timeout: 30_000 });
    expect([bad.status, bad.stderr]).toEqual([2, expect.stringMatching(/svc: flag -whisper-model: \/etc\/hosts: /)]);
    // Another ggml file (whisper.cpp's voice-activity model) aborted the process in a ggml assert (134);
    // a header without weights, or a model cut short, booted and then answered "" to every request.
    const cut = join(mkdtempSync(join(tmpdir(), 'svc-whisper-cut-')), 'cut.bin');
    writeFileSync(cut, readFileSync(syntheticModel('whisper-tiny')).subarray(0, 100_000));
    // A weight type ggml does not know asserted in ggml_ftype_to_ggml_type, the check's own call (134).
    const typed = join(mkdtempSync(join(tmpdir(), 'svc-whisper-type-')), 'type4.bin');
    const head = Buffer.from(readFileSync(fixtureModel('for-tests-ggml-tiny.bin')));
    head.writeInt32LE(4, 44);
    writeFileSync(typed, head);
    const cases: Array<[string, RegExp]> = [
      [typed, /is not a whisper model \(unknown weight type 4\)/],
      [fixtureModel('for-tests-silero-v6.2.0-ggml.bin'), /is not a whisper model \(its header's sizes are not a whisper model's\)/],
      [fixtureModel('for-tests-ggml-tiny.bin'), /holds no weights/],
      [cut, /holds no weights|could not load/],
    ];
    for (const [file, why] of cases) {
      const r = spawnSync(process.execPath, [join(ROOT, 'bin', 'svc.js'), '-m', fixtureModel(STORIES), '-whisper', '-whisper-model', file, '-addr', '127.0.0.1:0'], { encoding: 'utf8', timeout: 30_000 });
      expect([file, r.status, r.stderr]).toEqual([file, 2, expect.stringMatching(why)]);
    }
  });

  it('exports nothing of whisper.cpp or its ggml: the two ggml copies never meet', () => {
    const symbols = execFileSync('nm', ['-D', '--defined-only', ADDON], { encoding: 'utf8' })
      .split('\n')
      .map((l) => l.trim().split(/\s+/).pop()!)
      .filter(Boolean);
    expect(symbols.filter((s) => /ggml|whisper/.test(s))).toEqual([]);
    expect(symbols).toContain('napi_register_module_v1');
  });
});
