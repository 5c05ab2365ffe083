import { connect } from 'node:net';
/**
 * Requests the routes never see whole: bodies that are not JSON or nest too deep, wrong field
 * types, URLs and headers refused before routing. Each gets the spec's status and error shape
 * (`{"error":{"message","type"}}`, a plain string on /api/ routes) and a message naming where
 * the problem is; fields the spec ignores are ignored whatever their type.
 */
import { request } from 'node:http';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(120_000);

/** A raw request: fetch would refuse the URL or the header this needs. */
function raw(url: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { headers, agent: false }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('malformed requests', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
  });
  afterAll(async () => {
    await srv?.stop();
  });
  const chat = (body: unknown) => postJson(`${srv.url}/v1/chat/completions`, body);
  const message = (r: { json: any }) => r.json?.error?.message;

  it('a body that is not JSON: what was expected, the offset and the field', async () => {
    const cases: Array<[string, string]> = [
      ['{"messages": [}', "malformed JSON: unexpected '}', expected a value at offset 14 (in messages[0])"],
      ['{"messages":', 'malformed JSON: unexpected end of input, expected a value at offset 12 (in messages)'],
      ['{"messages":[{"role":"user","content":"hi"},{"role" "x"}]}', "malformed JSON: unexpected '\"', expected ':' at offset 52 (in messages[1].role)"],
      ['{"max_tokens": 01}', 'malformed JSON: bad number at offset 16 (in max_tokens)'],
      ['not json', "malformed JSON: unexpected 'o', expected 'null' at offset 1"],
    ];
    for (const [body, want] of cases) {
      const r = await chat(body);
      expect(r.status).toBe(400);
      expect(r.json).toEqual({ error: { message: want, type: 'Bad Request' } });
    }
    // The local-runner dialect: the same message as a plain string.
    const ollama = await postJson(`${srv.url}/api/chat`, '{"model":');
    expect(ollama.status).toBe(400);
    expect(ollama.json).toEqual({ error: 'malformed JSON: unexpected end of input, expected a value at offset 9 (in model)' });
  });

  it('a body is JSON whatever its declared type (curl -d sends a form type); it must be an object', async () => {
    const body = JSON.stringify({ model: '', prompt: 'Once', stream: false, options: { num_predict: 2 } });
    for (const type of ['application/x-www-form-urlencoded', 'text/plain', undefined]) {
      const r = await fetch(`${srv.url}/api/generate`, { method: 'POST', headers: type ? { 'content-type': type } : {}, body: new TextEncoder().encode(body) });
      expect(r.status).toBe(200);
      expect(((await r.json()) as { eval_count: number }).eval_count).toBe(2);
    }
    for (const [text, got] of [['[]', 'an array'], ['"x"', 'the string "x"'], ['null', 'null'], ['3', 'number 3']]) {
      const r = await chat(text);
      expect(r.status).toBe(400);
      expect(r.json).toEqual({ error: { message: `cannot parse request: the body must be a JSON object (got ${got})`, type: 'Bad Request' } });
    }
    const ollama = await postJson(`${srv.url}/api/chat`, '[]');
    expect(ollama.json).toEqual({ error: 'cannot parse request: the body must be a JSON object (got an array)' });
  });

  it('a lone surrogate escape ("\\ud800") is text like any other on every route, as on completions', async () => {
    // Written as JSON text: JSON.stringify would escape it the same way.
    const text = '"h\\ud800i"';
    const post = async (path: string, body: string) => {
      const r = await fetch(`${srv.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      return { status: r.status, text: await r.text() };
    };
    const routes: Array<[string, string]> = [
      ['/v1/completions', `{"prompt":${text},"max_tokens":2}`],
      ['/v1/chat/completions', `{"messages":[{"role":"user","content":${text}}],"max_tokens":2}`],
      ['/v1/messages', `{"model":"","max_tokens":2,"messages":[{"role":"user","content":${text}}]}`],
      ['/v1/responses', `{"input":${text},"max_output_tokens":2}`],
      ['/api/chat', `{"messages":[{"role":"user","content":${text}}],"stream":false,"options":{"num_predict":2}}`],
    ];
    for (const [path, body] of routes) {
      const r = await post(path, body);
      // Chat routes answered 400 "cannot render the chat template: [json.exception.parse_error.101] ...".
      expect([path, r.status, r.text.includes('json.exception')]).toEqual([path, 200, false]);
    }
  });

  it('a client that leaves halfway through its body is not logged as a server error', async () => {
    const { port } = new URL(srv.url);
    for (let i = 0; i < 3; i++) {
      await new Promise<void>((resolve) => {
        const s = connect(Number(port), '127.0.0.1', () =>
          s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"mess', () =>
            setTimeout(() => {
              s.destroy();
              resolve();
            }, 50),
          ),
        );
      });
    }
    await new Promise((r) => setTimeout(r, 200));
    // Each was an ERROR line with a stack ("POST /v1/chat/completions: aborted").
    expect(srv.logs()).not.toMatch(/ERROR.*aborted/);
    expect((await fetch(`${srv.url}/healthz`)).status).toBe(200);
  });

  it('a small body nested thousands of levels deep is refused, not a 500', async () => {
    for (const [open, close] of [['[', ']'], ['{"a":', '}']]) {
      const body = `{"messages":[{"role":"user","content":"x"}],"max_tokens":1,"x":${open.repeat(3000)}1${close.repeat(3000)}}`;
      for (const path of ['/v1/chat/completions', '/v1/completions']) {
        const r = await postJson(`${srv.url}${path}`, body);
        expect(r.status).toBe(400);
        expect(message(r)).toMatch(/^cannot parse request: nested deeper than 256 levels at offset \d+$/);
      }
    }
    // 200 levels is within bounds: the unknown field is ignored.
    const ok = await chat(`{"messages":[{"role":"user","content":"Once"}],"max_tokens":1,"x":${'['.repeat(200)}${']'.repeat(200)}}`);
    expect(ok.status).toBe(200);
  });

  it('a key named __proto__, escaped or not, is refused on every route (it was dropped: a decision named so went unasked)', async () => {
    const refused = 'cannot parse request: a key named "__proto__" is not accepted (it names an object\'s prototype)';
    for (const body of [
      '{"messages":[{"role":"user","content":"x"}],"max_tokens":1,"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object","properties":{"__proto__":{"type":"string"}}}}}}',
      '{"messages":[{"role":"user","content":"x"}],"max_tokens":1,"x":{"\\u005f_proto__":1}}',
    ]) {
      const r = await postJson(`${srv.url}/v1/chat/completions`, body);
      expect([r.status, message(r)]).toEqual([400, refused]);
    }
    const local = await postJson(`${srv.url}/api/generate`, '{"prompt":"x","__proto__":{}}');
    expect([local.status, local.json.error]).toEqual([400, refused]);
    // As text in a string it is only text.
    const text = await chat('{"messages":[{"role":"user","content":"say \\"__proto__\\": 1"}],"max_tokens":1}');
    expect(text.status).toBe(200);
  });

  it('a wrong type is named as one, with the value that came', async () => {
    const m = [{ role: 'user', content: 'x' }];
    expect(message(await chat({ messages: m, max_tokens: 'ten' }))).toBe('cannot parse request: max_tokens: max_tokens must be an integer number (got the string "ten")');
    expect(message(await chat({ messages: m, max_completion_tokens: 2.5 }))).toBe('cannot parse request: max_completion_tokens: max_completion_tokens must be an integer number (got number 2.5)');
    const lp = await postJson(`${srv.url}/v1/completions`, { prompt: 'x', logprobs: true });
    expect(lp.status).toBe(400);
    expect(message(lp)).toBe('cannot parse request: logprobs: logprobs must be an integer number (got boolean true)');
  });

  it('fields the spec ignores are ignored whatever their type; n and stop may be null', async () => {
    const r = await chat({ messages: [{ role: 'user', content: 'Once' }], max_tokens: 1, user: 5, stream_options: 'junk', n: null, stop: null, svc_format: null, svc_grammar: null, svc_lexicon: null });
    expect(r.status).toBe(200);
    expect(r.json.object).toBe('chat.completion');
    const c = await postJson(`${srv.url}/v1/completions`, { prompt: 'Once', max_tokens: 1, user: [1], n: null });
    expect(c.status).toBe(200);
  });

  it('a URL with a bad percent-escape, and headers over the limit, in the spec shape', async () => {
    const url = await raw(srv.url, '/v1/models/%ZZ');
    expect(url.status).toBe(400);
    expect(url.json).toEqual({ error: { message: 'malformed URL: /v1/models/%ZZ is not a valid URL (a bad percent-escape?)', type: 'Bad Request' } });
    const big = { 'x-big': 'a'.repeat(20_000) };
    const h = await raw(srv.url, '/v1/models', big);
    expect(h.status).toBe(431);
    expect(h.json).toEqual({ error: { message: 'the request headers are larger than this server accepts', type: 'Request Header Fields Too Large' } });
    expect((await raw(srv.url, '/api/tags', big)).json).toEqual({ error: 'the request headers are larger than this server accepts' });
    expect((await fetch(`${srv.url}/healthz`)).status).toBe(200);
  });

  it('/v1/stats?model= with an empty name is the default model', async () => {
    const r = (await (await fetch(`${srv.url}/v1/stats?model=`)).json()) as { model: string };
    expect(r.model).toBe('stories260K');
    // Any spelling the catalog takes; a name nothing lists is the spec's 404 with the names.
    expect(((await (await fetch(`${srv.url}/v1/stats?model=STORIES260K:latest`)).json()) as { model: string }).model).toBe('stories260K');
    const twice = await fetch(`${srv.url}/v1/stats?model=&model=x`);
    expect([twice.status, ((await twice.json()) as any).error.message]).toEqual([400, 'cannot parse request: the query parameter model is given more than once']);
    const unknown = await fetch(`${srv.url}/v1/stats?model=nosuch`);
    expect([unknown.status, ((await unknown.json()) as any).error.message]).toEqual([404, expect.stringMatching(/^no model named nosuch; available: stories260K/)]);
  });

  it('/v1/completions takes chat sampling fields: response_format is enforced, max_completion_tokens wins', async () => {
    const plain = await postJson(`${srv.url}/v1/completions`, { prompt: 'Once', max_tokens: 24, temperature: 0 });
    expect(() => JSON.parse(plain.json.choices[0].text)).toThrow();
    const json = await postJson(`${srv.url}/v1/completions`, { prompt: 'Once', max_tokens: 64, temperature: 0, response_format: { type: 'json_object' } });
    expect(json.json.choices[0].finish_reason).toBe('stop');
    expect(typeof JSON.parse(json.json.choices[0].text)).toBe('object');
    const capped = await postJson(`${srv.url}/v1/completions`, { prompt: 'Once', max_tokens: 10, max_completion_tokens: 3, temperature: 0 });
    expect(capped.json.usage.completion_tokens).toBe(3);
  });
});
