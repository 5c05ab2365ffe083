import OpenAI from 'openai';
import Ajv from 'ajv';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixtureModel, STORIES, syntheticModel } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

const WORDS = ['Once', 'upon', 'a', 'time', 'there', 'was', 'little', 'girl', 'named', 'Lily', 'She', 'she', 'loved', 'to', 'play', 'in', 'the', 'park', 'and', 'he', 'with', 'her', 'big', 'dog', 'day', 'happy', 'saw'];

/** Every word is listed; a word still open when max_tokens cut the output need only start a listed word. */
function expectListed(words: string[], finish: string, lastOpen: boolean): void {
  words.forEach((w, i) => {
    if (finish === 'length' && lastOpen && i === words.length - 1) expect(WORDS.some((l) => l.startsWith(w))).toBe(true);
    else expect(WORDS).toContain(w);
  });
}

/** Text constraints on a real small model (stories260K): lexicon and GBNF grammars. */
describe('lexicon and grammar constraints (stories260K, -lexicon)', () => {
  let srv: RunningServer;
  let client: OpenAI;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-lexicon-'));
    const file = join(dir, 'words.txt');
    writeFileSync(file, `# test list\n${WORDS.join('\n')}\ndon't\n`);
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2', '-lexicon', file]);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('logs the loaded word list at startup; an unreadable or empty list stops the server', async () => {
    expect(srv.logs()).toMatch(/lexicon: 27 words from .*words\.txt \(1 lines that are not one word skipped\)/);
    await expect(startServer(['-m', fixtureModel(STORIES), '-lexicon', '/nonexistent/words.txt'])).rejects.toThrow(/^server exited with 2:\nsvc: flag -lexicon: cannot read \/nonexistent\/words\.txt \(ENOENT\)/);
    const empty = join(mkdtempSync(join(tmpdir(), 'svc-lexicon-')), 'empty.txt');
    writeFileSync(empty, '# nothing\n123\n');
    await expect(startServer(['-m', fixtureModel(STORIES), '-lexicon', empty])).rejects.toThrow(/^server exited with 2:[\s\S]*holds no words/);
  });

  it('svc_lexicon: every run of letters is a listed word, on chat and completions', async () => {
    for (const seed of [1, 2, 3, 4]) {
      const c: any = await client.completions.create({ model: '', prompt: 'Once upon a time', max_tokens: 40, temperature: 1, seed, svc_lexicon: true } as any);
      const chat: any = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Tell a story' }], max_tokens: 40, temperature: 1, seed, svc_lexicon: true } as any);
      for (const [text, finish] of [[c.choices[0].text, c.choices[0].finish_reason], [chat.choices[0].message.content, chat.choices[0].finish_reason]]) {
        const runs: string[] = text.match(/[A-Za-z]+/g) ?? [];
        expect(runs.length).toBeGreaterThan(3);
        expectListed(runs, finish, /[A-Za-z]$/.test(text));
      }
    }
  });

  it('svc_lexicon_strict: listed words separated by single spaces, nothing else', async () => {
    for (const seed of [1, 2, 3]) {
      const c: any = await client.completions.create({ model: '', prompt: 'Once upon a time', max_tokens: 30, temperature: 1, seed, svc_lexicon_strict: true } as any);
      const chat: any = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 30, temperature: 1, seed, svc_lexicon: true, svc_lexicon_strict: true } as any);
      for (const [text, finish] of [[c.choices[0].text, c.choices[0].finish_reason], [chat.choices[0].message.content, chat.choices[0].finish_reason]]) {
        expect(text).toMatch(/^[A-Za-z]+( [A-Za-z]+)*$/);
        expectListed(text.split(' '), finish, true);
      }
    }
    // The messages dialect maps the same fields onto the same constraint.
    const m = await postJson(`${srv.url}/v1/messages`, { max_tokens: 20, messages: [{ role: 'user', content: 'Hi' }], svc_lexicon_strict: true });
    expect(m.status).toBe(200);
    expectListed(m.json.content[0].text.split(' '), m.json.stop_reason === 'max_tokens' ? 'length' : 'stop', true);
  });

  it('refuses a lexicon combined with another constraint or with tools', async () => {
    const base = { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, svc_lexicon: true };
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ svc_schema: { type: 'object' } }, /^svc_lexicon cannot be combined with svc_schema: a request takes one output constraint$/],
      [{ grammar: 'root ::= "a"' }, /^svc_lexicon cannot be combined with grammar/],
      [{ svc_format: 'json' }, /^svc_lexicon cannot be combined with svc_format/],
      [{ response_format: { type: 'json_object' } }, /^svc_lexicon cannot be combined with response_format/],
      [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }] }, /^svc_lexicon cannot be combined with tools/],
    ];
    for (const [extra, message] of cases) {
      const r = await postJson(`${srv.url}/v1/chat/completions`, { ...base, ...extra });
      expect(r.status).toBe(400);
      expect(r.json.error.message).toMatch(message);
    }
    const ok = await postJson(`${srv.url}/v1/chat/completions`, { ...base, response_format: { type: 'text' } });
    expect(ok.status).toBe(200);
  });

  const YES_NO = 'root ::= answer (" " answer){0,5} "."\nanswer ::= "yes" | "no"';
  const YES_NO_RE = /^(yes|no)( (yes|no)){0,5}\.$/;

  it('svc_grammar and grammar: the output matches the grammar', async () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const chat: any = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Yes or no?' }], max_tokens: 40, temperature: 1, seed, svc_grammar: YES_NO } as any);
      expect(chat.choices[0].message.content).toMatch(YES_NO_RE);
      expect(chat.choices[0].finish_reason).toBe('stop');
      const c: any = await client.completions.create({ model: '', prompt: 'Once upon a time', max_tokens: 40, temperature: 1, seed, grammar: YES_NO } as any);
      expect(c.choices[0].text).toMatch(YES_NO_RE);
    }
  });

  it('svc_format json and response_format json_object give valid JSON', async () => {
    // Greedy with room to spare: a sampled object may run past any small budget.
    const c: any = await client.completions.create({ model: '', prompt: 'Once upon a time', max_tokens: 200, temperature: 0, svc_format: 'json' } as any);
    expect(c.choices[0].finish_reason).toBe('stop');
    expect(typeof JSON.parse(c.choices[0].text)).toBe('object');
    const chat = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'JSON please' }], max_tokens: 200, temperature: 0, response_format: { type: 'json_object' } });
    expect(chat.choices[0].finish_reason).toBe('stop');
    expect(typeof JSON.parse(chat.choices[0].message.content!)).toBe('object');
  });

  it('an invalid grammar is a 400 naming the problem', async () => {
    const cases: Array<[string, string]> = [
      ['root ::= "abc', 'invalid grammar: line 1, column 14: unexpected end of input inside a string literal'],
      ['root ::= answer', 'invalid grammar: line 1, column 10: undefined rule "answer"'],
      ['start ::= "a"', "invalid grammar: grammar does not contain a 'root' symbol"],
    ];
    for (const [gbnf, message] of cases) {
      const r = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], svc_grammar: gbnf });
      expect(r.status).toBe(400);
      expect(r.json).toEqual({ error: { message, type: 'Bad Request' } });
      await expect(client.completions.create({ model: '', prompt: 'x', grammar: gbnf } as any)).rejects.toMatchObject({ status: 400 });
    }
    expect(srv.proc.exitCode).toBeNull();
  });

  it('a repetition with its minimum above its maximum is refused (llama.cpp expanded it until memory ran out)', async () => {
    const r = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], max_tokens: 4, svc_grammar: 'root ::= "a"{5,2}' });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toBe('invalid grammar: line 1, column 13: the repetition {5,2} has its minimum above its maximum');
    expect((await fetch(`${srv.url}/healthz`)).status).toBe(200);
  });

  it('a grammar that allows no token fails its own request (400) and no other in the same step', async () => {
    // Token ids past the vocabulary and an impossible character parse, then allow nothing.
    const plain = { prompt: 'Once upon a time', max_tokens: 24, temperature: 0 };
    const alone = (await postJson(`${srv.url}/v1/completions`, plain)).json.choices[0].text;
    for (const gbnf of ['root ::= <[99999999]>', 'root ::= "\\x00"']) {
      const [bad, good] = await Promise.all([
        postJson(`${srv.url}/v1/completions`, { prompt: 'Once upon a time', max_tokens: 8, svc_grammar: gbnf }),
        postJson(`${srv.url}/v1/completions`, plain),
      ]);
      expect(bad.status).toBe(400);
      expect(bad.json.error.message).toBe('the output constraint allows no token at this point: the grammar or schema cannot be satisfied');
      expect(good.status).toBe(200);
      expect(good.json.choices[0].text).toBe(alone);
    }
    expect(srv.logs()).not.toMatch(/ERROR \[http\]/);
  });

  it('a streamed request that fails before its first token gets its 400, not a stream cut after its opening frames', async () => {
    // The stream's 200 and opening frames (chat's role chunk, message_start, response.created)
    // go out with the first token: before this, completions closed the connection with no
    // answer at all and the others sent 200 and their opening frames, then cut.
    const grammar = 'root ::= "\\x00"';
    const message = 'the output constraint allows no token at this point: the grammar or schema cannot be satisfied';
    const bodies: Array<[string, Record<string, unknown>]> = [
      ['/v1/completions', { prompt: 'Once upon a time', max_tokens: 8 }],
      ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }],
      ['/v1/messages', { model: 'stories260K', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }],
      ['/v1/responses', { model: 'stories260K', input: 'hi', max_output_tokens: 8 }],
    ];
    for (const [path, body] of bodies) {
      const r = await fetch(`${srv.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true, svc_grammar: grammar }) });
      expect([path, r.status, r.headers.get('content-type')]).toEqual([path, 400, 'application/json; charset=utf-8']);
      expect(await r.json()).toEqual({ error: { message, type: 'Bad Request' } });
    }
    // The official client sees an API error it can catch, not a dropped connection.
    const err = await client.chat.completions
      .create({ model: 'stories260K', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8, stream: true, svc_grammar: grammar } as never)
      .then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
    // A stream that can start still opens with the role chunk and ends with [DONE].
    const ok = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, stream: true }) });
    const frames = (await ok.text()).split('\n\n').filter(Boolean);
    expect(ok.status).toBe(200);
    expect(JSON.parse(frames[0].slice(6)).choices[0].delta).toEqual({ role: 'assistant', content: '' });
    expect(frames.at(-1)).toBe('data: [DONE]');
    expect((await fetch(`${srv.url}/healthz`)).status).toBe(200);
  });
});

const SCHEMA = {
  type: 'object',
  properties: {
    color: { type: 'string', enum: ['red', 'green', 'blue'] },
    // Bounded: llama.cpp's grammar for a bare "number" allows exponents past double range (1e900 parses as Infinity).
    size: { type: 'integer', minimum: 1, maximum: 500 },
    ok: { type: 'boolean' },
  },
  required: ['color', 'size', 'ok'],
  additionalProperties: false,
};

/** JSON Schema constraints on a synthetic chat model: random weights, so only the constraint makes the output valid. */
describe('JSON schema constraints (synthetic qwen2-tiny)', () => {
  let srv: RunningServer;
  let client: OpenAI;
  const validate = new Ajv({ strict: true }).compile(SCHEMA);

  beforeAll(async () => {
    srv = await startServer(['-m', syntheticModel('qwen2-tiny'), '-threads', '2']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
  }, 600_000);
  afterAll(async () => {
    await srv?.stop();
  });

  it('response_format json_schema: the output validates for 20 different seeds', async () => {
    const texts = new Set<string>();
    for (let seed = 1; seed <= 20; seed++) {
      const r = await client.chat.completions.create({
        model: '',
        messages: [{ role: 'user', content: 'Describe a thing' }],
        max_tokens: 200,
        temperature: 1,
        seed,
        response_format: { type: 'json_schema', json_schema: { name: 'thing', schema: SCHEMA, strict: true } },
      });
      expect(r.choices[0].finish_reason).toBe('stop');
      const value = JSON.parse(r.choices[0].message.content!);
      expect(validate(value)).toBe(true);
      texts.add(r.choices[0].message.content!);
    }
    // Different seeds sample different valid objects: the schema constrains, it does not fix the answer.
    expect(texts.size).toBeGreaterThan(10);
  });

  it('patterns in JavaScript\'s syntax and a lone integer minimum hold (llama.cpp dropped \\d, \\s and escapes, and let 11 pass minimum 100)', async () => {
    const schema = {
      type: 'object',
      properties: {
        zip: { type: 'string', pattern: '^\\d{5}$' },
        // An email in zod's manner, bounded: escapes in a class, a lookahead (left out unchecked, the rest holds).
        email: { type: 'string', pattern: "^(?!\\.)[a-z0-9_'+\\-\\.]{1,8}@[a-z0-9\\-]{1,8}\\.[a-z]{2,3}$" },
        word: { type: 'string', pattern: '^\\w{2,6}\\s\\S{1,3}$' },
        n: { type: 'integer', minimum: 100 },
      },
      required: ['zip', 'email', 'word', 'n'],
      additionalProperties: false,
    };
    const lax = { ...schema, properties: { ...schema.properties, email: { type: 'string', pattern: "^[a-z0-9_'+\\-\\.]{1,8}@[a-z0-9\\-]{1,8}\\.[a-z]{2,3}$" } } };
    const valid = new Ajv({ strict: true }).compile(lax);
    for (let seed = 1; seed <= 6; seed++) {
      const r = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], max_tokens: 400, temperature: 1, seed, response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
      expect([seed, r.json.choices[0].finish_reason]).toEqual([seed, 'stop']);
      const value = JSON.parse(r.json.choices[0].message.content);
      expect([seed, value, valid(value)]).toEqual([seed, value, true]);
    }
    // The same through a forced tool call.
    const tools = [{ type: 'function', function: { name: 'set_zip', parameters: { type: 'object', properties: { zip: schema.properties.zip, n: schema.properties.n }, required: ['zip', 'n'] } } }];
    for (let seed = 1; seed <= 3; seed++) {
      const r = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], tools, tool_choice: 'required', max_tokens: 200, temperature: 1, seed });
      const args = JSON.parse(r.json.choices[0].message.tool_calls[0].function.arguments);
      expect([seed, /^\d{5}$/.test(args.zip), args.n >= 100]).toEqual([seed, true, true]);
    }
    // What the pattern lets through sits in a JSON string as written: no raw control character,
    // quote or backslash (\s wrote raw newlines, \D and . tabs: no JSON), and each alternative anchors itself.
    for (const pattern of ['^\\s{3}$', '^\\D{4}$', '^.{6}$', '^[^a]{5}$', '^\\d{2}$|^\\d{4}-\\d$', '^ab\\/?$']) {
      const ok = new Ajv({ strict: true }).compile({ type: 'object', properties: { v: { type: 'string', pattern } }, required: ['v'] });
      for (let seed = 1; seed <= 4; seed++) {
        const r = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], max_tokens: 200, temperature: 1, seed, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { v: { type: 'string', pattern } }, required: ['v'] } } } });
        const text = r.json.choices[0].message.content as string;
        expect([pattern, seed, ok(JSON.parse(text))]).toEqual([pattern, seed, true]);
      }
    }
    // A pattern with no grammar form is a 400 for a format (it ran unconstrained under a 200).
    const bad = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'string', pattern: '^\\p{L}+$' } } } } } });
    expect([bad.status, bad.json.error.message]).toEqual([400, 'invalid JSON schema: properties.a: pattern "^\\\\p{L}+$" cannot be enforced while sampling: Unicode property classes (\\p{…}) have no grammar form here']);
  });

  it('svc_schema wins over response_format', async () => {
    const other = { type: 'object', properties: { n: { type: 'integer', enum: [7, 8] } }, required: ['n'], additionalProperties: false };
    for (const seed of [1, 2, 3]) {
      const r: any = await client.chat.completions.create({
        model: '',
        messages: [{ role: 'user', content: 'x' }],
        max_tokens: 200,
        temperature: 1,
        seed,
        response_format: { type: 'json_schema', json_schema: { name: 'thing', schema: SCHEMA } },
        svc_schema: other,
      } as any);
      expect([7, 8]).toContain(JSON.parse(r.choices[0].message.content).n);
    }
  });

  it('keeps schema properties named like Object.prototype members (constructor, toString, prototype) in their order', async () => {
    const schema = { type: 'object', properties: { constructor: { const: 5 }, toString: { enum: ['a'] }, prototype: { const: true } }, required: ['constructor', 'toString', 'prototype'], additionalProperties: false };
    const r: any = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'x' }], max_tokens: 100, temperature: 1, seed: 3, svc_schema: schema } as any);
    const out = JSON.parse(r.choices[0].message.content);
    expect(Object.keys(out)).toEqual(['constructor', 'toString', 'prototype']);
    expect(out).toEqual(JSON.parse('{"constructor":5,"toString":"a","prototype":true}'));
  });

  it('svc_schema on /v1/completions', async () => {
    const r: any = await client.completions.create({ model: '', prompt: 'x', max_tokens: 200, temperature: 1, seed: 5, svc_schema: SCHEMA } as any);
    expect(validate(JSON.parse(r.choices[0].text))).toBe(true);
  });

  it('an invalid schema is a 400 naming the problem', async () => {
    const bad = { type: 'object', properties: { a: { $ref: '#/definitions/missing' } } };
    const r = await postJson(`${srv.url}/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: bad } },
    });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/^invalid JSON schema: .*#\/definitions\/missing/s);
    const s = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], svc_schema: { type: 'strange' } });
    expect(s.status).toBe(400);
    expect(s.json.error.message).toMatch(/^invalid JSON schema: .*Unrecognized schema/s);
    const notObject = await postJson(`${srv.url}/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: 'no' } },
    });
    expect(notObject.status).toBe(400);
    expect(notObject.json.error.message).toBe('response_format.json_schema.schema must be a JSON Schema object');
    const kind = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], response_format: { type: 'yaml' } });
    expect(kind.status).toBe(400);
    expect(kind.json.error.message).toMatch(/^response_format.type must be text, json_object or json_schema/);
  });

  it('a schema no value satisfies is a 400 on every route that takes one (a length range upside down hung the server)', async () => {
    const chat = (extra: Record<string, unknown>) => postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], max_tokens: 8, ...extra });
    const upsideDown = { type: 'string', minLength: 5, maxLength: 2 };
    const rf = await chat({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: upsideDown } } });
    expect([rf.status, rf.json.error.message]).toEqual([400, 'invalid JSON schema: minLength 5 is above maxLength 2, which no value satisfies']);
    // A pattern's quantifier {5,2} (it reached llama.cpp's grammar parser, which refuses it too).
    const pattern = await postJson(`${srv.url}/v1/completions`, { prompt: 'x', max_tokens: 8, svc_schema: { type: 'string', pattern: '^a{5,2}$' } });
    expect([pattern.status, pattern.json.error.message]).toEqual([400, 'invalid JSON schema: pattern "^a{5,2}$" is not a valid regular expression (numbers out of order in {} quantifier)']);
    const cases: Array<[unknown, string]> = [
      [{ type: 'array', minItems: 3, maxItems: 1 }, 'minItems 3 is above maxItems 1, which no value satisfies'],
      [{ type: 'string', enum: [] }, 'enum lists no value, which no value satisfies'],
      [{ not: {} }, 'the keyword "not" is not supported: a grammar cannot exclude what a schema matches'],
      // It was taken, and the answer ignored it.
      [{ type: 'object', properties: { a: { type: 'string', pattern: '^(a' } } }, 'properties.a: pattern "^(a" is not a valid regular expression (Unterminated group)'],
      [{ type: 'object', properties: { a: { type: 'array', items: upsideDown } } }, 'properties.a.items: minLength 5 is above maxLength 2, which no value satisfies'],
    ];
    for (const [schema, why] of cases) {
      const r = await chat({ svc_schema: schema });
      expect([r.status, r.json.error.message]).toEqual([400, `invalid JSON schema: ${why}`]);
    }
    const ollama = await postJson(`${srv.url}/api/generate`, { model: '', prompt: 'x', format: upsideDown, stream: false });
    expect([ollama.status, ollama.json.error]).toEqual([400, 'invalid JSON schema: minLength 5 is above maxLength 2, which no value satisfies']);
    const tool = (parameters: unknown) => chat({ tools: [{ type: 'function', function: { name: 'f', parameters } }], tool_choice: 'required' });
    const t1 = await tool({ type: 'object', properties: { s: upsideDown } });
    expect([t1.status, t1.json.error.message]).toEqual([400, 'tool "f" parameters: properties.s: minLength 5 is above maxLength 2, which no value satisfies']);
    const t2 = await tool({ type: 'object', properties: { s: { type: 'string', pattern: '^a{5,2}$' } } });
    expect(t2.status).toBe(400);
    // A tool's patterns are not held to JavaScript's syntax (Python's are common there); llama.cpp refuses this one.
    expect(t2.json.error.message).toMatch(/the repetition \{5,2\} has its minimum above its maximum/);
    const python = await tool({ type: 'object', properties: { a: { type: 'string', pattern: '^(?i)(yes|no)$' }, b: { type: 'string', pattern: '^(?P<code>[A-Z]{3})$' } } });
    expect(python.status).toBe(200);
    expect((await fetch(`${srv.url}/healthz`)).status).toBe(200);
  });

  it('a pattern llama.cpp\'s grammar would take minutes a token to follow is a 400 on every route (it held the engine for every request)', async () => {
    const slow = { type: 'string', pattern: '^(b|c)*{200}$' };
    const why = 'pattern "^(b|c)*{200}$" repeats an expression that can match nothing 200 times in a row; llama.cpp\'s grammar would try every way to split the text among them (at most 8 are allowed)';
    const started = performance.now();
    const chat = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], max_tokens: 16, svc_schema: slow });
    expect([chat.status, chat.json.error.message]).toEqual([400, `invalid JSON schema: ${why}`]);
    const messages = await postJson(`${srv.url}/v1/messages`, { max_tokens: 16, svc_schema: { type: 'object', properties: { s: slow } }, messages: [{ role: 'user', content: 'x' }] });
    expect([messages.status, messages.json.error.message]).toEqual([400, `invalid JSON schema: properties.s: ${why}`]);
    const ollama = await postJson(`${srv.url}/api/chat`, { model: '', messages: [{ role: 'user', content: 'x' }], format: slow, stream: false });
    expect([ollama.status, ollama.json.error]).toEqual([400, `invalid JSON schema: ${why}`]);
    const responses = await postJson(`${srv.url}/v1/responses`, { input: 'x', max_output_tokens: 16, text: { format: { type: 'json_schema', name: 'x', schema: slow } } });
    expect([responses.status, responses.json.error.message]).toEqual([400, `invalid JSON schema: ${why}`]);
    const tool = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], max_tokens: 16, tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { s: slow } } } }] });
    expect([tool.status, tool.json.error.message]).toEqual([400, `tool "f" parameters: properties.s: ${why}`]);
    expect(performance.now() - started).toBeLessThan(10_000);
    // llama.cpp reads {,n} and { n} as repetitions too.
    for (const pattern of ['^(b|c)*{,200}$', '^(b|c)*{ 200}$']) {
      const r = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], max_tokens: 16, svc_schema: { type: 'string', pattern } });
      expect([r.status, r.json.error.message]).toEqual([400, expect.stringContaining('repeats an expression that can match nothing 200 times in a row')]);
    }
    // 8 copies is fine, and quick.
    const ok = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], max_tokens: 16, temperature: 0, svc_schema: { type: 'string', pattern: '^((b|c)*){8}$' } });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.json.choices[0].message.content)).toMatch(/^[bc]*$/);
  });

  it('svc_lexicon without -lexicon is a 400', async () => {
    const r = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], svc_lexicon: true });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toBe('svc_lexicon needs a word list: start the server with -lexicon <file>');
    const c = await postJson(`${srv.url}/v1/completions`, { prompt: 'x', svc_lexicon_strict: true });
    expect(c.status).toBe(400);
  });
});
