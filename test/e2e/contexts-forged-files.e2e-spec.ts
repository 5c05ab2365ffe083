/**
 * Snapshot and export files that were tampered with or damaged, and context bodies with nulls
 * and wrong types: every one is a 4xx naming the problem, never a 500, a crash or a restored
 * context whose next decode fails (which failed every other request in the same step).
 * File layout: libs/contexts/src/snapshot/snapshot-file.ts.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join as joinPath } from 'node:path';
import { spillRoot } from '../../libs/engine/src/models/kept-contexts';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

interface Parts {
  prefix: Buffer;
  header: unknown;
  tokens: number[];
  payload: Buffer;
}

function split(file: Buffer): Parts {
  const hLen = file.readUInt32LE(12);
  let o = 16 + hLen;
  const n = file.readUInt32LE(o);
  o += 4;
  const tokens = Array.from({ length: n }, (_, i) => file.readInt32LE(o + 4 * i));
  o += 4 * n;
  const pLen = Number(file.readBigUInt64LE(o));
  return { prefix: file.subarray(0, 12), header: JSON.parse(file.toString('utf8', 16, 16 + hLen)), tokens, payload: file.subarray(o + 8, o + 8 + pLen) };
}

function join(p: Parts): Buffer {
  const h = Buffer.from(JSON.stringify(p.header));
  const body = Buffer.alloc(4 + h.length + 4 + 4 * p.tokens.length + 8);
  let o = body.writeUInt32LE(h.length, 0);
  o += h.copy(body, o);
  o = body.writeUInt32LE(p.tokens.length, o);
  for (const t of p.tokens) o = body.writeInt32LE(t, o);
  body.writeBigUInt64LE(BigInt(p.payload.length), o);
  return Buffer.concat([p.prefix, body, p.payload]);
}

/** The f32 payload is llama.cpp's sequence state: magic, seq id, stream count, cell count, then (pos, n_seq, ids) per cell. */
const CELLS = 12;
const FIRST_POS = 16;

describe('forged and damaged context files', () => {
  let srv: RunningServer;
  let snap: Buffer;
  let longSnap: Buffer;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
    const a = await postJson(`${srv.url}/v1/contexts`, { prompt: 'Once upon a time' });
    snap = Buffer.from(await (await fetch(`${srv.url}/v1/contexts/${a.json.id}/snapshot`)).arrayBuffer());
    const b = await postJson(`${srv.url}/v1/contexts`, { prompt: 'Once upon a time, there was a little girl named Lily. She loved' });
    longSnap = Buffer.from(await (await fetch(`${srv.url}/v1/contexts/${b.json.id}/snapshot`)).arrayBuffer());
  });
  afterAll(async () => {
    await srv?.stop();
  });

  const restore = async (file: Buffer, path = 'restore', type = 'application/octet-stream') => {
    const r = await fetch(`${srv.url}/v1/contexts/${path}`, { method: 'POST', headers: { 'content-type': type }, body: file });
    return { status: r.status, json: (await r.json()) as any };
  };
  const expectRefused = async (file: Buffer, message: string | RegExp) => {
    const r = await restore(file);
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(message);
  };

  it('restores the file as written, also sent with curl --data-binary\'s form type', async () => {
    expect((await restore(snap)).status).toBe(201);
    expect((await restore(snap, 'restore', 'application/x-www-form-urlencoded')).status).toBe(201);
  });

  it('a cell count past the file is refused before llama.cpp sizes anything by it', async () => {
    for (const cells of [0x04000000, 0x7f000000]) {
      const p = split(snap);
      const payload = Buffer.from(p.payload);
      payload.writeUInt32LE(cells, CELLS);
      await expectRefused(join({ ...p, payload }), `corrupt context file: the state claims ${cells} cells in ${payload.length} bytes`);
    }
    const rss = Number((await (await fetch(`${srv.url}/metrics`)).text()).match(/^svc_process_resident_memory_bytes (\d+)/m)?.[1]);
    expect(rss).toBeLessThan(1 << 30);
  });

  it("another file's token list, or positions out of order, are refused", async () => {
    const p = split(snap);
    await expectRefused(join({ ...p, tokens: split(longSnap).tokens }), /^corrupt context file: its KV state holds \d+ cells for \d+ tokens$/);
    const payload = Buffer.from(p.payload);
    payload.writeInt32LE(payload.readInt32LE(FIRST_POS + 8 + 4 * payload.readUInt32LE(FIRST_POS + 4)), FIRST_POS); // cell 0 takes cell 1's position
    await expectRefused(join({ ...p, payload }), /^corrupt context file: its KV state holds position \d+, not one of 0\.\.\d+ once each$/);
    // The server still serves the requests a failed decode step used to take down with it.
    const ok = await postJson(`${srv.url}/v1/completions`, { prompt: 'Once upon a time', max_tokens: 6, temperature: 0 });
    expect(ok.json.choices[0].text).toBe(', there was a little g');
  });

  it('bytes after the state are refused; with them a damaged cell list is still checked', async () => {
    // Trailing bytes defeat the full walk, whose fallback (for layouts it does not know) checked
    // only the cell count: a duplicated position got through, and the context's next decode
    // failed every request in its step.
    const p = split(snap);
    const tail = Buffer.from([0, 0, 0, 0]);
    await expectRefused(join({ ...p, payload: Buffer.concat([p.payload, tail]) }), `corrupt context file: llama.cpp read ${p.payload.length} of its KV state's ${p.payload.length + 4} bytes`);
    const dup = Buffer.from(p.payload);
    const n = p.tokens.length;
    // The last cell (each is pos, n_seq = 1, seq id: 12 bytes) takes position 0.
    dup.writeInt32LE(0, FIRST_POS + 12 * (n - 1));
    await expectRefused(join({ ...p, payload: Buffer.concat([dup, tail]) }), `corrupt context file: its KV state holds position 0, not one of 0..${n - 1} once each`);
    const [innocent, after] = await Promise.all([
      postJson(`${srv.url}/v1/completions`, { prompt: 'Once upon a time', max_tokens: 6, temperature: 0 }),
      restore(join({ ...p, payload: Buffer.concat([dup, tail]) })),
    ]);
    expect([innocent.json.choices[0].text, after.status, after.json.error.message]).toEqual([', there was a little g', 400, `corrupt context file: its KV state holds position 0, not one of 0..${n - 1} once each`]);
  });

  it('bytes after the payload, or flags the format does not define, are refused', async () => {
    await expectRefused(Buffer.concat([snap, Buffer.from('GARBAGE-TRAILER')]), 'corrupt context file: 15 bytes after the payload');
    const flagged = Buffer.from(snap);
    flagged.writeUInt16LE(0xfe, 10);
    await expectRefused(flagged, 'corrupt context file: unknown flags 0xfe');
  });

  it('a state llama.cpp refuses is a 400 that moves no other context out of the KV cache', async () => {
    for (let i = 0; i < 3; i++) expect((await postJson(`${srv.url}/v1/contexts`, { prompt: `Once upon a time ${i}` })).status).toBe(201);
    const p = split(snap);
    const bad = Buffer.from(p.payload);
    // After the cells (12 bytes each) come v_trans and the layer count, then layer 0's K type (f16 = 1).
    const kType = FIRST_POS + 12 * p.tokens.length + 8;
    expect(bad.readInt32LE(kType)).toBe(1);
    bad.writeInt32LE(0, kType);
    await expectRefused(join({ ...p, payload: bad }), 'the snapshot state does not fit this model');
    const listed: any[] = ((await (await fetch(`${srv.url}/v1/contexts`)).json()) as any).data;
    expect(listed.length).toBeGreaterThan(3);
    expect(listed.filter((c) => c.spilled)).toEqual([]);
  });

  it('a token id outside the vocabulary is refused', async () => {
    const p = split(snap);
    for (const bad of [512, -1, 0x7fffffff]) {
      const tokens = [...p.tokens];
      tokens[2] = bad;
      await expectRefused(join({ ...p, tokens }), `corrupt context file: token 2 is ${bad}, not an id of this model's vocabulary (0..511)`);
    }
  });

  it('a header that is not a context header, or names another precision, is a 400', async () => {
    const p = split(snap);
    await expectRefused(join({ ...p, header: null }), 'corrupt context file: its header is not a context header');
    await expectRefused(join({ ...p, header: { ...(p.header as object), precision: 'q4' } }), 'corrupt context file: unknown precision "q4"');
    await expectRefused(join({ ...p, header: { ...(p.header as object), precision: 'q8' } }), /^corrupt context file: /);
    const exp = await restore(join({ ...p, prefix: Buffer.concat([Buffer.from('SVCX\0\0\0\0', 'latin1'), p.prefix.subarray(8)]), header: null }), 'import');
    expect(exp.status).toBe(400);
  });

  it('damaged 8-bit payloads are 400s, whatever byte is hit', async () => {
    const a = await postJson(`${srv.url}/v1/contexts`, { prompt: 'Once upon a time' });
    for (const precision of ['q8', 'vq8']) {
      const file = Buffer.from(await (await fetch(`${srv.url}/v1/contexts/${a.json.id}/snapshot?precision=${precision}`)).arrayBuffer());
      const p = split(file);
      // Structural bytes (chunk kinds, lengths, counts) sit in the first bytes of every chunk: hit each of the first 64 and a spread of the rest.
      const spots = [...Array.from({ length: 64 }, (_, i) => i), ...Array.from({ length: 32 }, (_, i) => 64 + Math.floor(((p.payload.length - 64) * i) / 32))];
      for (const at of spots) {
        const payload = Buffer.from(p.payload);
        payload[at] ^= 0xa5;
        const r = await restore(join({ ...p, payload }));
        if (r.status >= 500) throw new Error(`${precision} byte ${at}: ${r.status} ${JSON.stringify(r.json)}`);
      }
    }
    expect((await fetch(`${srv.url}/healthz`)).status).toBe(200);
  });
});

describe('context and response bodies with nulls and wrong types', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2', '-ctx-size', '256']);
  });
  afterAll(async () => {
    await srv?.stop();
  });
  const create = (body: unknown) => postJson(`${srv.url}/v1/contexts`, body);

  it('refuses what is not a context body, with the spec messages', async () => {
    const cases: Array<[unknown, string]> = [
      [{ messages: [null] }, 'cannot parse request: messages[0] must be a message object'],
      [{ messages: [{ role: 'bad role!', content: 'hi' }] }, 'messages[0].role is not a role name. A role is letters, digits, underscore, hyphen, dot, up to 64 characters'],
      [{ model: 5 }, 'cannot parse request: model must be a string'],
      ['"x"', 'cannot parse request: the body must be a JSON object'],
      ['[]', 'cannot parse request: the body must be a JSON object'],
      ['null', 'cannot parse request: the body must be a JSON object'],
    ];
    for (const [body, message] of cases) {
      const r = await create(body);
      expect(r.status).toBe(400);
      expect(r.json).toEqual({ error: { message, type: 'Bad Request' } });
    }
  });

  it('null prompt or messages are absent', async () => {
    const r = await create({ prompt: 'Once', messages: null });
    expect(r.status).toBe(201);
    expect(r.json.tokens).toBeGreaterThan(0);
    expect((await create({ prompt: null })).json.tokens).toBe(0);
  });

  it('a prompt with no room left to generate is refused at creation', async () => {
    const r = await create({ prompt: 'Once upon a time, there was a little girl. '.repeat(40) });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/^the prompt is \d+ tokens; stories260K holds 256 positions per context$/);
  });

  it('previous_response_id null starts a new conversation', async () => {
    const r = await postJson(`${srv.url}/v1/responses`, { input: 'Once', previous_response_id: null, max_output_tokens: 2 });
    expect(r.status).toBe(200);
    expect(r.json.previous_response_id).toBeNull();
  });
});

describe('restore while running requests hold the KV cache', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '1', '-c', '2048', '-conc', '1', '-cache-slots', '0']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('is a 429 to retry (Retry-After, empty body), not a 400 blaming the file; the same file restores once they end', async () => {
    const long = 'Once upon a time, there was a little girl named Lily. '.repeat(70);
    const made = await postJson(`${srv.url}/v1/contexts`, { prompt: long });
    expect(made.json.tokens).toBeGreaterThan(900);
    const snap = Buffer.from(await (await fetch(`${srv.url}/v1/contexts/${made.json.id}/snapshot`)).arrayBuffer());
    // The context generates on toward 2048 cells: past about 1100 the cache has no room for another copy of it.
    const gen = await fetch(`${srv.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: long, max_tokens: 2000, temperature: 0, stream: true, svc_session: made.json.id }),
    });
    const reader = gen.body!.getReader();
    let chunks = 0;
    while (chunks < 150) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the generation ended before the test could restore beside it');
      chunks += new TextDecoder().decode(value).split('data: ').length - 1;
    }
    const busy = await fetch(`${srv.url}/v1/contexts/restore`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: snap });
    const still = await reader.read();
    expect([busy.status, busy.headers.get('retry-after'), await busy.text(), still.done]).toEqual([429, '1', '', false]);
    while (!(await reader.read()).done);
    const later = await fetch(`${srv.url}/v1/contexts/restore`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: snap });
    expect(later.status).toBe(201);
  });
});

describe('a damaged spill file', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '1', '-concurrency', '2', '-context-slots', '1']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('whose cell count is past the file is refused by the engine before it sizes anything by it; the server answers on', async () => {
    const a = (await postJson(`${srv.url}/v1/contexts`, { prompt: 'Once upon a time' })).json;
    const b = (await postJson(`${srv.url}/v1/contexts`, { prompt: 'One day' })).json;
    // One slot: making b spilled a. Spill files are llama.cpp's state as it wrote it, read back unchecked by svc.
    const root = joinPath(spillRoot(srv.proc.pid!), 'spill');
    const file = joinPath(root, readdirSync(root)[0], `${a.id}.kv`);
    const state = readFileSync(file);
    state.writeUInt32LE(0x08000000, CELLS); // 134M cells: llama.cpp reserved (and zeroed) about 2.8 GB for them
    writeFileSync(file, state);
    const t0 = Date.now();
    const r = await postJson(`${srv.url}/v1/completions`, { prompt: 'Once upon a time', max_tokens: 4, svc_session: a.id });
    const peak = Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${srv.proc.pid}/status`, 'utf8'))?.[1]) * 1024;
    expect(peak).toBeLessThan(1 << 30);
    expect(Date.now() - t0).toBeLessThan(5000);
    expect([r.status, r.json.error.message]).toEqual([500, `could not restore spilled context ${a.id}: its file on disk is damaged`]);
    // A sound spill file still reads back: c's making spills b, and b's use brings it back.
    expect((await postJson(`${srv.url}/v1/contexts`, { prompt: 'Lily' })).status).toBe(201);
    expect(((await (await fetch(`${srv.url}/v1/contexts/${b.id}`)).json()) as any).spilled).toBe(true);
    const ok = await postJson(`${srv.url}/v1/completions`, { prompt: 'One day', max_tokens: 6, temperature: 0, svc_session: b.id });
    expect([ok.status, ok.json.error]).toEqual([200, undefined]);
  });
});
