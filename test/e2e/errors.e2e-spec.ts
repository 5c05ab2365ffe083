import OpenAI from 'openai';
import { request } from 'node:http';
import { copyFileSync, mkdtempSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixtureModel, STORIES, syntheticModel } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(120_000);

describe('errors in the spec shape', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  const chat = (body: unknown) => postJson(`${srv.url}/v1/chat/completions`, body);

  it('400 when messages is empty', async () => {
    const r = await chat({ model: '', messages: [] });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: { message: 'messages is empty', type: 'Bad Request' } });
    // Missing or null is the same case (it was "messages must be an array (got no value)"), in every dialect.
    for (const body of [{ max_tokens: 1 }, { messages: null, max_tokens: 1 }]) {
      expect((await chat(body)).json).toEqual({ error: { message: 'messages is empty', type: 'Bad Request' } });
      expect((await postJson(`${srv.url}/v1/messages`, body)).json).toEqual({ error: { message: 'messages is empty', type: 'Bad Request' } });
      expect((await postJson(`${srv.url}/api/chat`, body)).json).toEqual({ error: 'messages is empty' });
    }
    expect((await chat({ messages: 'hi' })).json.error.message).toMatch(/^cannot parse request: messages/);
  });

  it('a JSON schema that is an array is refused, as on /v1/responses', async () => {
    const r = await chat({ messages: [{ role: 'user', content: 'x' }], max_tokens: 3, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: [] } } });
    expect([r.status, r.json.error.message]).toEqual([400, 'response_format.json_schema.schema must be a JSON Schema object']);
  });

  it('400 for a bad role name', async () => {
    const r = await chat({ messages: [{ role: 'user', content: 'hi' }, { role: 'bad role!', content: 'x' }] });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/^messages\[1\]\.role is not a role name\. A role is letters, digits, underscore, hyphen, dot, up to 64 characters/);
    const long = await chat({ messages: [{ role: 'a'.repeat(65), content: 'x' }] });
    expect(long.status).toBe(400);
    const ok = await chat({ messages: [{ role: 'narrator.v2_x-y', content: 'Once' }], max_tokens: 2 });
    expect(ok.status).toBe(200);
  });

  it('400 malformed JSON names the offset', async () => {
    const r = await chat('{"messages": [}');
    expect(r.status).toBe(400);
    expect(r.json.error.type).toBe('Bad Request');
    expect(r.json.error.message).toMatch(/^malformed JSON: /);
  });

  it('400 cannot parse request for a wrong field type', async () => {
    const r = await chat({ messages: 'hello' });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/^cannot parse request: messages/);
    const t = await chat({ messages: [{ role: 'user', content: 'x' }], temperature: 'hot' });
    expect(t.status).toBe(400);
    expect(t.json.error.message).toMatch(/^cannot parse request: temperature/);
  });

  it('a JSON body sent as application/octet-stream is read as JSON, as every other type is (it was a 400 naming nothing)', async () => {
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'x' }], max_tokens: 1 });
    for (const path of ['/v1/chat/completions', '/api/chat']) {
      const r = await fetch(`${srv.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: path === '/api/chat' ? body.replace('{', '{"stream":false,') : body });
      expect([path, r.status]).toEqual([path, 200]);
    }
    const bad = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: '{"messages": [' });
    expect([bad.status, ((await bad.json()) as any).error.message]).toEqual([400, expect.stringMatching(/^malformed JSON: /)]);
  });

  it('wrong field types: "cannot parse request" on /v1/responses text.format and /api/copy too', async () => {
    for (const format of ['json_object', 5]) {
      const r = await postJson(`${srv.url}/v1/responses`, { input: 'x', max_output_tokens: 2, text: { format } });
      // It was a 200 with no format applied, echoing the format as if it were.
      expect([r.status, r.json.error.message]).toEqual([400, expect.stringMatching(/^cannot parse request: text\.format must be an object/)]);
    }
    const copy = await postJson(`${srv.url}/api/copy`, { source: 5, destination: 'x' });
    expect([copy.status, copy.json.error]).toEqual([400, 'cannot parse request: source must be a string']);
  });

  it('ignores unknown fields', async () => {
    const r = await chat({ messages: [{ role: 'user', content: 'Once' }], max_tokens: 2, tempreature: 5, user: 'u', stream_options: { include_usage: true } });
    expect(r.status).toBe(200);
  });

  it('400 for n other than 1', async () => {
    const r = await chat({ messages: [{ role: 'user', content: 'x' }], n: 2 });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/^n must be 1/);
  });

  it('404 for an unknown model, listing what exists', async () => {
    const r = await chat({ model: 'gpt-17', messages: [{ role: 'user', content: 'x' }] });
    expect(r.status).toBe(404);
    expect(r.json.error).toEqual({ message: 'no model named gpt-17; available: stories260K', type: 'Not Found' });
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
    await expect(client.chat.completions.create({ model: 'gpt-17', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 404 });
  });

  it('404 for an unknown route, in the same shape', async () => {
    const r = await postJson(`${srv.url}/v1/nothing-here`, {});
    expect(r.status).toBe(404);
    expect(r.json.error.type).toBe('Not Found');
    // Whatever the body: a malformed one answered 400 "malformed JSON" before the route was looked at.
    const bad = await postJson(`${srv.url}/v1/nothing-here`, '{"a":tru}');
    expect([bad.status, bad.json.error.type]).toEqual([404, 'Not Found']);
    const runner = await postJson(`${srv.url}/api/nothing-here`, '{"a":tru}');
    expect([runner.status, runner.json.error]).toEqual([404, 'Cannot POST /api/nothing-here']);
  });

  it('413 from the declared length, before the body is read', async () => {
    const declared = 33554432 + 1;
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(`${srv.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(declared) } }, (r) => {
        let body = '';
        r.on('data', (d) => (body += d));
        r.on('end', () => {
          req.destroy(); // the server would read on: this client never sends the rest
          resolve({ status: r.statusCode ?? 0, body });
        });
      });
      req.on('error', reject);
      req.write('{"messages":');
      // Never send the rest: the answer must come from the header alone.
    });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual({
      error: { message: `request body is ${declared} bytes; this server accepts 33554432`, type: 'Payload Too Large' },
    });
  });

  it('Expect: 100-continue gets the 413 alone for a refused length, and a 100 for an accepted one', async () => {
    const exchange = (length: number) =>
      new Promise<string>((resolve) => {
        const { port } = new URL(srv.url);
        const s = connect(Number(port), '127.0.0.1', () =>
          s.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`),
        );
        let got = '';
        s.on('data', (d) => {
          got += d;
          // The first status line is what matters: a 100 (then the body is sent) or the final answer.
          if (got.includes('\r\n\r\n')) {
            s.destroy();
            resolve(got.split('\r\n')[0]);
          }
        });
        s.on('error', () => resolve(got));
      });
    // Node sent "100 Continue" before the 413, inviting an upload of a body already refused.
    expect(await exchange(40_000_000)).toBe('HTTP/1.1 413 Payload Too Large');
    expect(await exchange(2)).toBe('HTTP/1.1 100 Continue');
  });

  it('413 for a chunked binary upload (no declared length) once it passes the route limit', async () => {
    // /v1/contexts/import has its own limit (the largest context this model holds, at least 32 MiB).
    const chunk = Buffer.alloc(1 << 20, 7);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 48) return controller.close();
        sent++;
        controller.enqueue(chunk);
      },
    });
    const res = await fetch(`${srv.url}/v1/contexts/import`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    const json = (await res.json()) as { error: { message: string; type: string } };
    expect(json.error.message).toMatch(/^request body is over \d+ bytes; this server accepts \d+$/);
    expect(json.error.type).toBe('Payload Too Large');
  });

  /**
   * A client that writes its whole request before it reads (as many do) over a raw socket: the
   * server answers 413 midway, and must read on rather than close, or the client's later writes
   * meet a reset (EPIPE) and the answer is lost.
   */
  async function writeAllThenRead(head: string, chunks: Buffer[]): Promise<{ status: number; text: string }> {
    const url = new URL(srv.url);
    const sock = connect(Number(url.port), url.hostname);
    let text = '';
    sock.on('data', (d) => (text += d.toString('latin1')));
    let failure: Error | undefined;
    sock.on('error', (err) => (failure ??= err));
    const closed = new Promise<void>((resolve) => sock.on('close', () => resolve()));
    const write = (b: Buffer | string) => new Promise<void>((resolve, reject) => sock.write(b, (err) => (err ? reject(failure ?? err) : resolve())));
    await new Promise<void>((resolve) => sock.once('connect', () => resolve()));
    await write(head);
    for (const c of chunks) await write(c);
    // The whole request is out; only now look for the answer (the connection stays open: keep-alive).
    const deadline = Date.now() + 30_000;
    while (!/\r\n\r\n[\s\S]*\}$/.test(text) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    sock.end();
    await closed;
    return { status: Number(/^HTTP\/1\.1 (\d+)/.exec(text)?.[1] ?? 0), text };
  }

  /** A chunked upload of `mib` 1-MiB chunks of `fill` to `path`, ended or not. */
  function chunkedPost(path: string, contentType: string, mib: number, ended: boolean, fill = 7): [string, Buffer[]] {
    const data = Buffer.alloc(1 << 20, fill);
    const chunk = Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from('\r\n')]);
    const chunks = Array.from({ length: mib }, () => chunk);
    if (ended) chunks.push(Buffer.from('0\r\n\r\n'));
    return [`POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: ${contentType}\r\ntransfer-encoding: chunked\r\n\r\n`, chunks];
  }
  const chunkedImport = (mib: number, ended: boolean) => chunkedPost('/v1/contexts/import', 'application/octet-stream', mib, ended);

  it('413 reaches a client that writes a whole chunked body before reading', async () => {
    const r = await writeAllThenRead(...chunkedImport(48, true));
    expect(r.status).toBe(413);
    expect(r.text).not.toMatch(/connection: close/i);
    expect(r.text).toMatch(/"type":"Payload Too Large"/);
  });

  it('413 for a chunked JSON body over 32 MiB, and the connection stays usable', async () => {
    // Spaces: valid JSON whitespace, so only the size can be what is refused.
    const r = await writeAllThenRead(...chunkedPost('/v1/chat/completions', 'application/json', 40, true, 32));
    expect(r.status).toBe(413);
    expect(r.text).not.toMatch(/connection: close/i);
    expect(r.text).toMatch('{"error":{"message":"request body is over 33554432 bytes; this server accepts 33554432","type":"Payload Too Large"}}');
  });

  it('stops reading a chunked body 64 MiB past its limit: the connection is closed', async () => {
    // 32 MiB allowed + 64 MiB read on: 160 MiB is never taken in full.
    await expect(writeAllThenRead(...chunkedImport(160, false))).rejects.toThrow(/EPIPE|ECONNRESET/);
    const h = await fetch(`${srv.url}/healthz`);
    expect(h.status).toBe(200);
  });

  it('413 reaches a client that writes a whole declared-length body before reading', async () => {
    const size = 33554432 + (8 << 20);
    const head = `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${size}\r\n\r\n`;
    const chunks = Array.from({ length: size >> 20 }, () => Buffer.alloc(1 << 20, 32));
    const r = await writeAllThenRead(head, chunks);
    expect(r.status).toBe(413);
    expect(r.text).toMatch(`request body is ${size} bytes; this server accepts 33554432`);
  });
});

describe('the no-model state', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer([]);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('answers generation routes with 503 and stays healthy', async () => {
    const r = await postJson(`${srv.url}/v1/chat/completions`, { model: '', messages: [{ role: 'user', content: 'x' }] });
    expect(r.status).toBe(503);
    expect(r.json).toEqual({ error: { message: 'this server has no model. Pull one: POST /api/pull', type: 'Service Unavailable' } });
    const c = await postJson(`${srv.url}/v1/completions`, { prompt: 'x' });
    expect(c.status).toBe(503);
    const h = (await (await fetch(`${srv.url}/healthz`)).json()) as any;
    expect(h.status).toBe('ok');
    expect(h.model).toBe('');
    const models = await (await fetch(`${srv.url}/v1/models`)).json();
    expect(models).toEqual({ object: 'list', data: [] });
  });

  it('/v1/stats is the no-model 503 too (it was a 404 "Not Found" with this message)', async () => {
    const r = await fetch(`${srv.url}/v1/stats`);
    expect([r.status, ((await r.json()) as any).error]).toEqual([503, { message: 'this server has no model. Pull one: POST /api/pull', type: 'Service Unavailable' }]);
  });

  it('answers 503 whatever model a generation request names; store routes still say 404', async () => {
    const r = await postJson(`${srv.url}/v1/chat/completions`, { model: 'foo', messages: [{ role: 'user', content: 'x' }] });
    expect(r.status).toBe(503);
    const g = await postJson(`${srv.url}/api/generate`, { model: 'foo', prompt: 'x' });
    expect(g.json).toEqual({ error: 'this server has no model. Pull one: POST /api/pull' });
    // Embeddings too, named or not (a name was a 404 listing no names).
    for (const body of [{ model: 'foo', input: 'x' }, { input: 'x' }]) {
      const e = await postJson(`${srv.url}/api/embed`, body);
      expect([e.status, e.json]).toEqual([503, { error: 'this server has no model. Pull one: POST /api/pull' }]);
      const v1 = await postJson(`${srv.url}/v1/embeddings`, body);
      expect([v1.status, v1.json.error.message]).toEqual([503, 'this server has no model. Pull one: POST /api/pull']);
    }
    const show = await postJson(`${srv.url}/api/show`, { model: 'foo' });
    expect(show.status).toBe(404);
  });
});

describe('startup flags', () => {
  it('refuse unknown flags and bad values with a clear message', async () => {
    await expect(startServer(['-nonsense'])).rejects.toThrow(/unknown flag -nonsense/);
    await expect(startServer(['-concurrency', 'lots'])).rejects.toThrow(/flag -concurrency wants an integer/);
  });

  it('refuse a -m, -embed or -rerank path that names no file (a store name is looked up later)', async () => {
    await expect(startServer(['-m', '/nowhere/model.gguf'])).rejects.toThrow(/exited with 2:[\s\S]*flag -m: no model file at \/nowhere\/model\.gguf/);
    await expect(startServer(['-m', './nowhere'])).rejects.toThrow(/flag -m: no model file at \.\/nowhere/);
    await expect(startServer(['-embed', '/nowhere/encoder.gguf'])).rejects.toThrow(/exited with 2:[\s\S]*flag -embed: no model file at \/nowhere\/encoder\.gguf/);
    await expect(startServer(['-rerank', './nowhere.gguf'])).rejects.toThrow(/flag -rerank: no model file at \.\/nowhere\.gguf/);
  });

  it('refuse a file that is no GGUF model, or a folder (the server ran, failing every request)', async () => {
    await expect(startServer(['-m', '/etc/hosts'])).rejects.toThrow(/exited with 2:[\s\S]*flag -m: \/etc\/hosts is not a GGUF model file/);
    await expect(startServer(['-embed', tmpdir()])).rejects.toThrow(/exited with 2:[\s\S]*flag -embed: .* is a folder, not a model file/);
    // A text generator as the encoder booted, then refused every embedding.
    await expect(startServer(['-m', fixtureModel(STORIES), '-embed', fixtureModel(STORIES)])).rejects.toThrow(/exited with 2:[\s\S]*flag -embed: .*stories260K\.gguf is a model that generates text, not an encoder \(serve it with -m\)/);
  });

  it('a -m store name not pulled yet: /healthz and every generation say which model to pull (it said "Pull one", and a pull of another model then 404ed)', async () => {
    // The store holds an encoder only: embeddings without a model name still find it.
    const store = mkdtempSync(join(tmpdir(), 'svc-store-ghost-'));
    copyFileSync(syntheticModel('bert-tiny'), join(store, 'enc.gguf'));
    const srv = await startServer(['-m', 'not-pulled-yet', '-store', store, '-threads', '1'], { env: { OLLAMA_MODELS: mkdtempSync(join(tmpdir(), 'o-')) } });
    try {
      const why = 'this server\'s default model not-pulled-yet is not in the store. Pull it: POST /api/pull {"model": "not-pulled-yet"}';
      const health: any = await (await fetch(`${srv.url}/healthz`)).json();
      expect([health.status, health.warning]).toEqual(['ok', why]);
      const r = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }] });
      expect([r.status, r.json.error.message]).toEqual([503, why]);
      const e = await postJson(`${srv.url}/v1/embeddings`, { input: 'hello' });
      expect([e.status, e.json.model]).toEqual([200, 'enc']);
      // The server's state, not a new fault each time.
      expect(srv.logs()).not.toMatch(/ERROR/);
    } finally {
      await srv.stop();
    }
  });
});

describe('npm start (scripts/start-demo.mjs)', () => {
  it('serves the demo model from the fixtures folder; arguments go to svc', async () => {
    const srv = await startServer(['-threads', '2'], { entry: 'scripts/start-demo.mjs' });
    try {
      const r = await postJson(`${srv.url}/v1/completions`, { prompt: 'Once upon a time', max_tokens: 10, temperature: 0 });
      expect(r.json.model).toBe('stories260K');
      expect(r.json.choices[0].text).toBe(', there was a little girl named Lily');
    } finally {
      await srv.stop();
    }
  });

  it('without the file and without downloads, says so and exits 2', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'svc-no-models-'));
    const env = { SVC_MODELS_DIR: empty, SVC_CACHE_DIR: empty, SVC_NO_DOWNLOAD: '1' };
    await expect(startServer([], { entry: 'scripts/start-demo.mjs', env })).rejects.toThrow(/exited with 2:[\s\S]*the demo model is not here/);
  });
});
