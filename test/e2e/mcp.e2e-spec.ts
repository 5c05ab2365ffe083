import { CallToolResult, Client, ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { request as httpRequest } from 'node:http';
import { basename } from 'node:path';
import { fixtureModel, STORIES, syntheticModel } from './helpers/fixtures';
import { aliceAndBobCallers, postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

const VERSION = '2026-07-28';

/** The official client, pinned to 2026-07-28, with a credential; `sent` records each POST's MCP-Protocol-Version header. */
async function connect(srv: RunningServer, key?: string): Promise<{ client: Client; sent: Array<string | null> }> {
  const sent: Array<string | null> = [];
  const recording: typeof fetch = (url, init) => {
    sent.push(new Headers(init?.headers).get('mcp-protocol-version'));
    return fetch(url, init);
  };
  const client = new Client({ name: 'svc-e2e', version: '1.0.0' }, { versionNegotiation: { mode: { pin: VERSION } } });
  const headers: Record<string, string> = key ? { authorization: `Bearer ${key}` } : {};
  await client.connect(new StreamableHTTPClientTransport(new URL(`${srv.url}/mcp`), { requestInit: { headers }, fetch: recording }));
  return { client, sent };
}

/** The one text item a tool answers with, parsed. */
function toolJson(r: unknown): any {
  const res = r as CallToolResult;
  expect(res.content).toHaveLength(1);
  expect(res.content[0].type).toBe('text');
  return JSON.parse((res.content[0] as { text: string }).text);
}

/** A generation answer without what differs between two calls (ids, clocks, timings). */
function comparable(a: any): unknown {
  const { id: _id, created: _created, usage, ...rest } = a;
  return { ...rest, usage: { prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens, total_tokens: usage.total_tokens } };
}

/** A 2026-07-28 JSON-RPC request as the client's own transport frames it (the envelope in params._meta). */
function rpc(method: string, params: Record<string, unknown> = {}): Record<string, unknown> {
  const _meta = { 'io.modelcontextprotocol/protocolVersion': VERSION, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' }, 'io.modelcontextprotocol/clientCapabilities': {} };
  return { jsonrpc: '2.0', id: 7, method, params: { ...params, _meta } };
}

const mcpHeaders = (method: string, name?: string): Record<string, string> => ({
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': VERSION,
  'mcp-method': method,
  ...(name !== undefined ? { 'mcp-name': name } : {}),
});

describe('MCP on a chat model with an encoder and named callers (synthetic qwen2-tiny, bert-tiny)', () => {
  let srv: RunningServer;
  let alice: Client;
  let sent: Array<string | null>;
  let encoder: string;
  const ALICE = { authorization: 'Bearer alice-key' };
  const BOB = { authorization: 'Bearer bob-key' };

  beforeAll(async () => {
    const bert = syntheticModel('bert-tiny');
    encoder = basename(bert, '.gguf');
    srv = await startServer(['-m', syntheticModel('qwen2-tiny'), '-embed', bert, '-threads', '1', '-callers', aliceAndBobCallers()]);
    ({ client: alice, sent } = await connect(srv, 'alice-key'));
  }, 600_000);
  afterAll(async () => {
    await alice?.close();
    await srv?.stop();
  });

  it('the official client negotiates 2026-07-28 and every request carries it', async () => {
    expect(alice.getProtocolEra()).toBe('modern');
    expect(alice.getNegotiatedProtocolVersion()).toBe(VERSION);
    expect(alice.getServerVersion()).toEqual({ name: 'svc', version: '0.3.0' });
    await alice.listTools();
    expect(sent.length).toBeGreaterThan(1);
    expect(new Set(sent)).toEqual(new Set([VERSION]));
  });

  it('tools/list names the four tools with their input schemas', async () => {
    const { tools } = await alice.listTools();
    expect(tools.map((t) => t.name)).toEqual(['chat', 'complete', 'embed', 'list_models']);
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    expect(Object.keys(byName.chat.inputSchema.properties ?? {})).toEqual(['messages', 'model', 'max_tokens', 'temperature', 'json_schema']);
    expect(byName.chat.inputSchema.required).toEqual(['messages']);
    expect(byName.complete.inputSchema.required).toEqual(['prompt']);
    expect(byName.embed.inputSchema.required).toEqual(['input']);
    expect(byName.list_models.inputSchema).toEqual({ type: 'object', properties: {} });
    for (const t of tools) expect(t.description).toMatch(/JSON of (POST|GET) \/v1\//);
  });

  it('chat answers what POST /v1/chat/completions answers (greedy)', async () => {
    const body = { messages: [{ role: 'user', content: 'Say something' }], max_tokens: 12, temperature: 0 };
    const viaMcp = toolJson(await alice.callTool({ name: 'chat', arguments: body }));
    const viaHttp = await postJson(`${srv.url}/v1/chat/completions`, body, ALICE);
    expect(viaHttp.status).toBe(200);
    expect(viaMcp.id).toMatch(/^chatcmpl-/);
    expect(viaMcp.object).toBe('chat.completion');
    expect(viaMcp.usage.completion_tokens).toBe(12);
    expect(comparable(viaMcp)).toEqual(comparable(viaHttp.json));
    // Every key of the route's answer, usage's timings included: the same JSON, not a summary of it.
    expect(Object.keys(viaMcp)).toEqual(Object.keys(viaHttp.json));
    expect(Object.keys(viaMcp.usage)).toEqual(Object.keys(viaHttp.json.usage));
  });

  it('chat takes json_schema as the route takes response_format json_schema', async () => {
    const schema = { type: 'object', properties: { n: { type: 'integer', enum: [7, 8] } }, required: ['n'], additionalProperties: false };
    const viaMcp = toolJson(await alice.callTool({ name: 'chat', arguments: { messages: [{ role: 'user', content: 'x' }], max_tokens: 64, temperature: 0, json_schema: schema } }));
    const viaHttp = await postJson(
      `${srv.url}/v1/chat/completions`,
      { messages: [{ role: 'user', content: 'x' }], max_tokens: 64, temperature: 0, response_format: { type: 'json_schema', json_schema: { schema } } },
      ALICE,
    );
    expect(viaMcp.choices[0].finish_reason).toBe('stop');
    expect([7, 8]).toContain(JSON.parse(viaMcp.choices[0].message.content).n);
    expect(viaMcp.choices).toEqual(viaHttp.json.choices);
  });

  it('complete answers what POST /v1/completions answers (greedy)', async () => {
    const body = { prompt: 'Once upon a time', max_tokens: 10, temperature: 0 };
    const viaMcp = toolJson(await alice.callTool({ name: 'complete', arguments: body }));
    const viaHttp = await postJson(`${srv.url}/v1/completions`, body, ALICE);
    expect(viaMcp.object).toBe('text_completion');
    expect(viaMcp.choices[0].text.length).toBeGreaterThan(0);
    expect(comparable(viaMcp)).toEqual(comparable(viaHttp.json));
  });

  it('embed answers the vectors POST /v1/embeddings answers', async () => {
    const body = { input: ['hello world', 'the cat sat on the mat'], model: encoder };
    const viaMcp = toolJson(await alice.callTool({ name: 'embed', arguments: body }));
    const viaHttp = await postJson(`${srv.url}/v1/embeddings`, body, ALICE);
    expect(viaHttp.status).toBe(200);
    expect(viaMcp).toEqual(viaHttp.json);
    expect(viaMcp.data).toHaveLength(2);
    const v: number[] = viaMcp.data[0].embedding;
    expect(Math.sqrt(v.reduce((s, x) => s + x * x, 0))).toBeCloseTo(1, 4);
    // The server's encoder is the default: no model named answers the same vectors.
    expect(toolJson(await alice.callTool({ name: 'embed', arguments: { input: body.input } })).data).toEqual(viaHttp.json.data);
  });

  it('list_models answers what GET /v1/models answers', async () => {
    const viaMcp = toolJson(await alice.callTool({ name: 'list_models', arguments: {} }));
    const viaHttp = await fetch(`${srv.url}/v1/models`, { headers: ALICE });
    expect(viaMcp).toEqual(await viaHttp.json());
    expect(viaMcp.data.map((m: any) => m.capabilities)).toEqual(expect.arrayContaining([['chat'], ['embeddings']]));
  });

  it("a bad argument is a tool error holding the route's error JSON, and the server goes on", async () => {
    const cases: Array<[string, string, Record<string, unknown>]> = [
      ['chat', '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], max_tokens: 'ten' }],
      ['chat', '/v1/chat/completions', { messages: [] }],
      ['chat', '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], model: 'no-such-model' }],
      ['complete', '/v1/completions', { prompt: 42 }],
      ['embed', '/v1/embeddings', { input: '' }],
    ];
    for (const [tool, route, args] of cases) {
      const r = (await alice.callTool({ name: tool, arguments: args })) as CallToolResult;
      expect([tool, args, r.isError]).toEqual([tool, args, true]);
      const viaHttp = await postJson(`${srv.url}${route}`, args, ALICE);
      expect(viaHttp.status).toBeGreaterThanOrEqual(400);
      expect(toolJson(r)).toEqual(viaHttp.json);
    }
    const bad = (await alice.callTool({ name: 'chat', arguments: { messages: [{ role: 'user', content: 'x' }], json_schema: 'not a schema' } })) as CallToolResult;
    expect(bad.isError).toBe(true);
    expect(toolJson(bad)).toEqual({ error: { message: 'cannot parse request: json_schema must be a JSON Schema object', type: 'Bad Request' } });
    // An unknown tool is the SDK's JSON-RPC error, not a crash.
    await expect(alice.callTool({ name: 'no_such_tool', arguments: {} })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining('no_such_tool') });
    expect(toolJson(await alice.callTool({ name: 'list_models', arguments: {} })).object).toBe('list');
  });

  it("resources list only the caller's own contexts; another caller's does not exist", async () => {
    const mine = await postJson(`${srv.url}/v1/contexts`, { prompt: 'Once upon a time' }, ALICE);
    const theirs = await postJson(`${srv.url}/v1/contexts`, { prompt: 'zzz' }, BOB);
    expect([mine.status, theirs.status]).toEqual([201, 201]);
    expect(mine.json.id).not.toBe(theirs.json.id);
    const owned: any = await (await fetch(`${srv.url}/v1/contexts`, { headers: ALICE })).json();
    const { resources } = await alice.listResources();
    expect(resources.map((r) => r.uri).sort()).toEqual(owned.data.map((c: any) => `svc://contexts/${c.id}`).sort());
    expect(resources.map((r) => r.uri)).toContain(`svc://contexts/${mine.json.id}`);
    expect(resources.map((r) => r.uri)).not.toContain(`svc://contexts/${theirs.json.id}`);
    expect(resources.every((r) => r.mimeType === 'application/json')).toBe(true);

    const read = await alice.readResource({ uri: `svc://contexts/${mine.json.id}` });
    expect(read.contents).toHaveLength(1);
    expect(read.contents[0].uri).toBe(`svc://contexts/${mine.json.id}`);
    const ctx = JSON.parse((read.contents[0] as { text: string }).text);
    expect(ctx).toEqual(await (await fetch(`${srv.url}/v1/contexts/${mine.json.id}`, { headers: ALICE })).json());
    expect(ctx.tokens).toBeGreaterThan(0);

    // Bob's context answers exactly as one that was never made.
    const notFound = async (id: string) => {
      const err = await alice.readResource({ uri: `svc://contexts/${id}` }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ProtocolError);
      return { code: (err as ProtocolError).code, message: (err as Error).message.replace(id, '<id>') };
    };
    const stolen = await notFound(theirs.json.id);
    expect(stolen).toEqual({ code: -32602, message: 'no such context on this model: <id>' });
    expect(await notFound('ctx_999999')).toEqual(stolen);

    // Bob's own client lists his and reads it.
    const bob = (await connect(srv, 'bob-key')).client;
    try {
      expect((await bob.listResources()).resources.map((r) => r.uri)).toEqual([`svc://contexts/${theirs.json.id}`]);
      expect(JSON.parse(((await bob.readResource({ uri: `svc://contexts/${theirs.json.id}` })).contents[0] as { text: string }).text).id).toBe(theirs.json.id);
    } finally {
      await bob.close();
    }
  });

  it('refuses a request missing MCP-Protocol-Version, Mcp-Method or Mcp-Name, a 2025 handshake, and a body that is not JSON (raw requests)', async () => {
    const call = rpc('tools/call', { name: 'list_models', arguments: {} });
    const post = (headers: Record<string, string>, body: unknown = call) => postJson(`${srv.url}/mcp`, body, { ...ALICE, ...headers });
    // With every header the same request is answered: the refusals below are the headers'.
    const ok = await post(mcpHeaders('tools/call', 'list_models'));
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.json.result.content[0].text).object).toBe('list');

    const all = mcpHeaders('tools/call', 'list_models');
    const without = (name: string) => Object.fromEntries(Object.entries(all).filter(([k]) => k !== name));
    const refusals = [
      await post(without('mcp-protocol-version')),
      await post(without('mcp-method')),
      await post(without('mcp-name')),
      await post(mcpHeaders('resources/read'), rpc('resources/read', { uri: 'svc://contexts/ctx_1' })),
    ];
    for (const r of refusals) {
      expect(r.status).toBe(400);
      expect(r.json).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32020 } });
    }
    expect(refusals.map((r) => r.json.error.message)).toEqual([
      expect.stringContaining('MCP-Protocol-Version header is absent'),
      expect.stringContaining('Mcp-Method header is absent'),
      expect.stringContaining('Mcp-Name header is absent'),
      expect.stringContaining('Mcp-Name header is absent'),
    ]);
    // A name that disagrees with the body is refused too.
    expect((await post(mcpHeaders('tools/call', 'chat'))).json.error.code).toBe(-32020);
    // A 2025-era client (initialize, no protocol header) is told which version this endpoint speaks.
    const legacy = await postJson(
      `${srv.url}/mcp`,
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'old', version: '1' } } },
      { ...ALICE, accept: 'application/json, text/event-stream' },
    );
    expect(legacy.status).toBe(400);
    expect(legacy.json.error).toMatchObject({ code: -32022, data: { supported: [VERSION] } });
    // The service's parser reads the body first: its 400 for malformed JSON; the SDK wants JSON's media type.
    const malformed = await post(all, '{"jsonrpc": "2.0", "id": 7,');
    expect(malformed.status).toBe(400);
    expect(malformed.json.error.message).toMatch(/^malformed JSON: /);
    const plain = await post({ ...all, 'content-type': 'text/plain' });
    expect([plain.status, plain.json.error.code]).toEqual([415, -32000]);
  });

  it('GET and DELETE are the transport\'s 405 (no stream, no sessions), not a 404 "no MCP here"', async () => {
    for (const method of ['GET', 'DELETE']) {
      const r = await fetch(`${srv.url}/mcp`, { method, headers: ALICE });
      expect([method, r.status, r.headers.get('allow'), await r.json()]).toEqual([method, 405, 'POST', { jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null }]);
    }
  });

  it('only a browser origin on the serving machine may call it', async () => {
    const call = rpc('tools/call', { name: 'list_models', arguments: {} });
    const headers = { ...ALICE, ...mcpHeaders('tools/call', 'list_models') };
    const foreign = await postJson(`${srv.url}/mcp`, call, { ...headers, origin: 'https://evil.example' });
    expect(foreign.status).toBe(403);
    expect(foreign.json).toEqual({ error: { message: 'origin not permitted; a web page at https://evil.example may not call this server', type: 'Forbidden' } });
    // A page served by this server (its own origin) may.
    expect((await postJson(`${srv.url}/mcp`, call, { ...headers, origin: srv.url })).status).toBe(200);
    // A page on a DNS name rebound to this machine is not this server's origin.
    const rebound = await rawPost(srv.port, { ...headers, host: `rebound.example:${srv.port}`, origin: `http://rebound.example:${srv.port}` }, call);
    expect(rebound.status).toBe(403);
    expect(JSON.parse(rebound.body).error.message).toBe(`origin not permitted; a web page at http://rebound.example:${srv.port} may not call this server`);
    // So is one whose request line names a full URL (the rule read the whole target as the path, and skipped).
    const absolute = await rawPost(srv.port, { ...headers, origin: 'https://evil.example' }, call, `http://127.0.0.1:${srv.port}/mcp`);
    expect(absolute.status).toBe(403);
    // A caller with its key may reach the server by any name (a compose or cluster service, a proxy): it was a 403.
    for (const host of [`svc:${srv.port}`, `inference.example.com:${srv.port}`]) {
      const named = await rawPost(srv.port, { ...headers, host }, call);
      expect([host, named.status]).toEqual([host, 200]);
    }
  });
});

describe('MCP on a server with -api-key (stories260K)', () => {
  let srv: RunningServer;

  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '1', '-api-key', 'sekrit']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('needs the key: 401 without it, and the official client connects with it', async () => {
    const call = rpc('tools/call', { name: 'list_models', arguments: {} });
    const bare = await postJson(`${srv.url}/mcp`, call, mcpHeaders('tools/call', 'list_models'));
    expect(bare.status).toBe(401);
    expect(bare.headers.get('www-authenticate')).toBe('Bearer realm=svc');
    expect(bare.json).toEqual({ error: { message: 'this server requires an API key: send Authorization: Bearer <API_KEY>', type: 'Unauthorized' } });
    const wrong = await postJson(`${srv.url}/mcp`, call, { ...mcpHeaders('tools/call', 'list_models'), 'x-api-key': 'nope' });
    expect(wrong.status).toBe(401);
    await expect(connect(srv)).rejects.toThrow();

    const { client } = await connect(srv, 'sekrit');
    try {
      // stories260K's greedy continuation, the same through the tool as through the route.
      const body = { prompt: 'Once upon a time', max_tokens: 16, temperature: 0 };
      const viaMcp = toolJson(await client.callTool({ name: 'complete', arguments: body }));
      expect(viaMcp.choices[0].text.startsWith(', there was a little girl named Lily.')).toBe(true);
      const viaHttp = await postJson(`${srv.url}/v1/completions`, body, { 'x-api-key': 'sekrit' });
      expect(comparable(viaMcp)).toEqual(comparable(viaHttp.json));
    } finally {
      await client.close();
    }
  });

  it('a Host header that is no URL authority is answered as on every other route (it was a 500 "Failed to parse URL")', async () => {
    const call = rpc('tools/call', { name: 'list_models', arguments: {} });
    for (const host of ['exa mple', '[::1', 'a:99999', 'foo:bar']) {
      const r = await rawPost(srv.port, { ...mcpHeaders('tools/call', 'list_models'), authorization: 'Bearer sekrit', host }, call);
      expect([host, r.status]).toEqual([host, 200]);
      expect(JSON.parse(JSON.parse(r.body).result.content[0].text).object).toBe('list');
    }
  });
});

describe('MCP on an encoder-only server (synthetic bert-tiny)', () => {
  let srv: RunningServer;

  beforeAll(async () => {
    srv = await startServer(['-m', syntheticModel('bert-tiny'), '-threads', '1']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('resources/list is empty: an encoder holds no contexts (it was an "Invalid params" error)', async () => {
    const { client } = await connect(srv);
    try {
      expect((await client.listResources()).resources).toEqual([]);
      const embed = toolJson(await client.callTool({ name: 'embed', arguments: { input: 'hello' } }));
      expect(embed.data[0].embedding.length).toBeGreaterThan(0);
    } finally {
      await client.close();
    }
  });
});

/** A POST with a chosen Host header (fetch does not let one set it). */
function rawPost(port: number, headers: Record<string, string>, body: unknown, target = '/mcp'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: target, method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}
