/**
 * The studio page as served: its policy matches its inline script and style, it names no other
 * host, its markup holds every element its script looks up, and its own JavaScript, taken out of
 * the served HTML and run in a node vm, parses streams and builds requests correctly.
 */
import { runInNewContext } from 'node:vm';
import { cspHash, studioHeaders, studioHtml } from '../../libs/studio/src/page/studio-page';

const html = studioHtml();
const between = (open: string, close: string): string => {
  const start = html.indexOf(open);
  expect(start).toBeGreaterThanOrEqual(0);
  return html.slice(start + open.length, html.indexOf(close, start));
};
const script = between('<script>', '</script>');
const style = between('<style>', '</style>');

/** The page's svcStudio object, from a vm with no document (boot() does not run there). */
function studio(globals: Record<string, unknown> = {}): any {
  const ctx: Record<string, unknown> = { TextDecoder, JSON, Date, Math, Object, ...globals };
  runInNewContext(script, ctx, { filename: 'studio-inline.js' });
  return ctx.svcStudio;
}

/** A fetch answering one SSE body, delivered in the given pieces (as bytes). */
function sseFetch(pieces: Array<string | Uint8Array>, status = 200, calls: Array<{ url: string; init: any }> = []) {
  return async (url: string, init: any) => {
    calls.push({ url, init });
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        for (const p of pieces) c.enqueue(typeof p === 'string' ? new TextEncoder().encode(p) : p);
        c.close();
      },
    });
    return new Response(body, { status, headers: { 'content-type': status === 200 ? 'text/event-stream' : 'application/json' } });
  };
}

describe('the studio page', () => {
  it('is one document with exactly one inline script and style, each allowed by its hash and nothing else', () => {
    expect(html.match(/<script/g)).toHaveLength(1);
    expect(html.match(/<style/g)).toHaveLength(1);
    const csp = studioHeaders(script, style)['content-security-policy'];
    expect(csp).toContain(`script-src ${cspHash(script)};`);
    expect(csp).toContain(`style-src ${cspHash(style)};`);
    expect(csp).toMatch(/^default-src 'none';/);
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
    // The hash a browser computes: sha256 of the element's exact text, base64.
    expect(cspHash('alert(1)')).toBe("'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='");
  });

  it('loads nothing from elsewhere and carries no inline handler or style attribute (the policy would refuse them)', () => {
    expect(html).not.toMatch(/https?:\/\//i);
    expect(html).not.toMatch(/\/\/[a-z0-9.-]+\.[a-z]{2,}\//i);
    expect(html).not.toMatch(/\s(src|href)="(?!data:)[^"]*"/i);
    expect(html).not.toMatch(/\son[a-z]+=/i);
    expect(html).not.toMatch(/\sstyle=/i);
    expect(html).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/);
    // Every fetch path is this server's own, relative.
    const paths = [...script.matchAll(/'(\/[a-z0-9_/]+)'/g)].map((m) => m[1]);
    expect(new Set(paths)).toEqual(new Set(['/v1/chat/completions', '/studio/config', '/v1/models', '/v1/embeddings', '/v1/rerank', '/v1/redact', '/v1/messages/count_tokens', '/studio/exec']));
  });

  it('holds every element its script looks up by id', () => {
    const ids = new Set([...html.matchAll(/\sid="([^"]+)"/g)].map((m) => m[1]));
    const used = [...script.matchAll(/\$\('([^']+)'\)/g)].map((m) => m[1]);
    expect(used.length).toBeGreaterThan(40);
    expect(used.filter((id) => !ids.has(id))).toEqual([]);
    // Tabs: each button names a section that exists.
    const tabs = [...html.matchAll(/data-tab="([^"]+)"/g)].map((m) => m[1]);
    expect(tabs).toEqual(['chat', 'embed', 'rerank', 'redact', 'tokens', 'term']);
    for (const t of tabs) expect(ids.has(`tab-${t}`)).toBe(true);
  });

  it('runs without a document: boot() is left alone and svcStudio is there', () => {
    const s = studio();
    expect(Object.keys(s).sort()).toEqual(['authHeaders', 'call', 'chatBody', 'cosine', 'execSummary', 'lines', 'parseSse', 'streamChat', 'usageLine']);
  });
});

describe("the page's SSE parser", () => {
  const s = studio();

  it('splits events on blank lines, keeps the unfinished rest, joins data lines, skips comments', () => {
    expect(s.parseSse('data: {"a":1}\n\ndata: [DONE]\n\n')).toEqual({ events: [{ event: 'message', data: '{"a":1}' }, { event: 'message', data: '[DONE]' }], rest: '' });
    expect(s.parseSse('data: one\n\ndata: tw')).toEqual({ events: [{ event: 'message', data: 'one' }], rest: 'data: tw' });
    expect(s.parseSse(': keep-alive\nevent: delta\ndata: a\ndata: b\nid: 3\n\n').events).toEqual([{ event: 'delta', data: 'a\nb' }]);
    expect(s.parseSse('data:x\n\n').events).toEqual([{ event: 'message', data: 'x' }]);
    expect(s.parseSse(':only a comment\n\n').events).toEqual([]);
  });

  it('reads CRLF and CR line ends, also when a CRLF is split between chunks', () => {
    expect(s.parseSse('data: a\r\n\r\ndata: b\r\rdata: c').events.map((e: any) => e.data)).toEqual(['a', 'b']);
    const first = s.parseSse('data: a\r\n\r');
    expect(first.events).toEqual([]);
    const second = s.parseSse(first.rest + '\ndata: b\r\n\r\n');
    expect(second.events.map((e: any) => e.data)).toEqual(['a', 'b']);
  });
});

describe("the page's chat stream", () => {
  const s = studio({ Response, ReadableStream });
  const chunk = (delta: object, finish: string | null = null, usage?: object) => `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) })}\n\n`;
  const usage = { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8, prompt_tokens_details: { cached_tokens: 2 }, svc_prefill_ms: 1.234, svc_decode_ms: 4 };

  it('posts the settings as a streamed request with the credentials, and folds the chunks however the bytes arrive', async () => {
    const text = chunk({ role: 'assistant' }) + chunk({ reasoning_content: 'hm' }) + chunk({ content: 'Hé' }) + chunk({ content: 'llo' }) + chunk({}, 'stop', usage) + 'data: [DONE]\n\n';
    const bytes = new TextEncoder().encode(text);
    // Cut everywhere, 'é' included (two bytes in UTF-8).
    const pieces = Array.from({ length: bytes.length }, (_, i) => bytes.subarray(i, i + 1));
    const calls: Array<{ url: string; init: any }> = [];
    const seen: string[] = [];
    const body = s.chatBody({ model: 'm', system: 'Be brief.', temperature: '0.2', maxTokens: '16', stop: 'END\n\n###', history: [{ role: 'user', content: 'Hi' }] });
    const out = await s.streamChat(sseFetch(pieces, 200, calls), { key: 'k1', marking: 'SECRET' }, body, { onDelta: (kind: string, t: string) => seen.push(`${kind}:${t}`) });
    expect(out).toMatchObject({ text: 'Héllo', reasoning: 'hm', finish: 'stop', usage, done: true });
    expect(seen).toEqual(['reasoning:hm', 'content:Hé', 'content:llo']);
    expect(out.ttftMs).not.toBeNull();
    expect(calls).toHaveLength(1);
    expect(calls[0].url).toBe('/v1/chat/completions');
    expect(calls[0].init.headers).toEqual({ 'content-type': 'application/json', authorization: 'Bearer k1', 'x-classification': 'SECRET' });
    expect(JSON.parse(calls[0].init.body)).toEqual({
      model: 'm',
      messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }],
      temperature: 0.2,
      max_tokens: 16,
      stop: ['END', '###'],
      stream: true,
    });
    expect(s.usageLine(out)).toMatch(/^5 prompt \(2 cached\) \+ 3 completion tokens · prefill 1\.2 ms · decode 4 ms \(500\.0 tok\/s\) · first token after .* ms · .* ms in all · finish: stop$/);
  });

  it('says when a stream ended without [DONE], and leaves out what the settings do not set', async () => {
    const out = await s.streamChat(sseFetch([chunk({ content: 'x' })]), {}, s.chatBody({ model: '', system: ' ', temperature: '', maxTokens: '', stop: '', history: [] }));
    expect(out.done).toBe(false);
    expect(s.usageLine(out)).toMatch(/stream ended without \[DONE\]: truncated$/);
    expect(s.chatBody({ model: '', system: '', temperature: 'x', maxTokens: '0', stop: '', history: [] })).toEqual({ model: '', messages: [] });
  });

  it("throws the service's error message with the status, in both error shapes", async () => {
    const answer = (status: number, body: unknown) => async () => new Response(JSON.stringify(body), { status });
    await expect(s.streamChat(answer(401, { error: { message: 'needs a key', type: 'Unauthorized' } }), {}, {})).rejects.toMatchObject({ message: '401: needs a key', status: 401 });
    await expect(s.call(answer(404, { error: 'no model' }), {}, '/v1/x')).rejects.toMatchObject({ message: '404: no model', status: 404 });
    await expect(s.call(async () => new Response('plain', { status: 500 }), {}, '/v1/x')).rejects.toMatchObject({ message: '500: plain' });
  });

  it('makes GET calls without a body and POST calls with JSON', async () => {
    const calls: Array<{ url: string; init: any }> = [];
    const f = async (url: string, init: any) => {
      calls.push({ url, init });
      return new Response('{"ok":true}', { status: 200 });
    };
    expect(await s.call(f, { key: 'k' }, '/studio/config')).toEqual({ ok: true });
    expect(await s.call(f, {}, '/v1/redact', { text: 'a' })).toEqual({ ok: true });
    expect(calls.map((c) => [c.url, c.init.method, c.init.headers, c.init.body])).toEqual([
      ['/studio/config', 'GET', { authorization: 'Bearer k' }, undefined],
      ['/v1/redact', 'POST', { 'content-type': 'application/json' }, '{"text":"a"}'],
    ]);
  });
});

describe("the page's small helpers", () => {
  const s = studio();
  it('cosine, lines and the command summary', () => {
    expect(s.cosine([1, 0], [1, 0])).toBe(1);
    expect(s.cosine([1, 0], [0, 2])).toBe(0);
    expect(s.cosine([0, 0], [1, 1])).toBe(0);
    expect(s.lines(' a \n\n b\n')).toEqual(['a', 'b']);
    expect(s.execSummary({ exit_code: 0, signal: null, duration_ms: 4, truncated: false, timed_out: false })).toBe('[exit 0 · 4 ms]');
    expect(s.execSummary({ exit_code: null, signal: 'SIGKILL', duration_ms: 300, truncated: true, timed_out: true })).toBe('[killed by SIGKILL, timed out, output truncated · 300 ms]');
  });
});
