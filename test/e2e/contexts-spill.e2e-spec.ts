import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spillRoot } from '../../libs/engine/src/models/kept-contexts';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

const STORY =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. ' +
  'One day, she saw a big red ball under a tree. She ran to get it and kicked it very high. ';

/** Where a server process spills contexts: $TMPDIR/svc-<pid>-<host>/spill/<hash of file and weights>/<id>.kv. */
function spillFiles(srv: RunningServer): string[] {
  const root = join(spillRoot(srv.proc.pid!), 'spill');
  if (!existsSync(root)) return [];
  return readdirSync(root).flatMap((d) => readdirSync(join(root, d)));
}

async function ctxState(srv: RunningServer, id: string): Promise<any> {
  const r = await fetch(`${srv.url}/v1/contexts/${id}`);
  expect(r.status).toBe(200);
  return r.json();
}

async function greedy(srv: RunningServer, body: Record<string, unknown>): Promise<any> {
  const r = await postJson(`${srv.url}/v1/completions`, { temperature: 0, seed: 1, max_tokens: 24, ...body });
  expect(r.status).toBe(200);
  return r.json;
}

describe('context spilling: beyond -context-slots', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2', '-concurrency', '2', '-context-slots', '2']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('spills the least recently used idle context, brings it back on use with the same greedy text, removes its file on delete', async () => {
    const a = (await postJson(`${srv.url}/v1/contexts`, { prompt: STORY })).json;
    const twin = (await postJson(`${srv.url}/v1/contexts/${a.id}/fork`, {})).json.data[0];
    // The twin holds exactly what `a` holds: its greedy continuation is `a`'s before any spill.
    const before = await greedy(srv, { prompt: STORY + 'The', svc_session: twin.id });
    expect((await ctxState(srv, a.id)).spilled).toBeUndefined();
    expect(spillFiles(srv)).toEqual([]);

    // A third context: two are resident already, so the least recently used (a) goes to disk.
    const b = (await postJson(`${srv.url}/v1/contexts`, { prompt: STORY })).json;
    expect(b.spilled).toBeUndefined();
    const spilled = await ctxState(srv, a.id);
    expect(spilled).toMatchObject({ id: a.id, tokens: a.tokens, pages: a.pages, spilled: true });
    // Written atomically: the final file only, no temp file left beside it.
    expect(spillFiles(srv)).toEqual([`${a.id}.kv`]);
    const listed = ((await (await fetch(`${srv.url}/v1/contexts`)).json()) as any).data;
    expect(listed.filter((c: any) => c.spilled).map((c: any) => c.id)).toEqual([a.id]);

    // Use brings it back transparently: same greedy text, its tokens reused from the spilled state.
    const after = await greedy(srv, { prompt: STORY + 'The', svc_session: a.id });
    expect(after.choices[0].text).toBe(before.choices[0].text);
    expect(after.usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(a.tokens - 8);
    const back = await ctxState(srv, a.id);
    expect(back.spilled).toBeUndefined(); // spec: `spilled` is present only while on disk
    expect(back.tokens).toBeGreaterThan(a.tokens);

    // Making room for `a` spilled the least recently used of the other two (the twin).
    expect((await ctxState(srv, twin.id)).spilled).toBe(true);
    expect(spillFiles(srv)).toEqual([`${twin.id}.kv`]);
    expect((await fetch(`${srv.url}/v1/contexts/${twin.id}`, { method: 'DELETE' })).status).toBe(204);
    expect(spillFiles(srv)).toEqual([]);
  });

  it('snapshots a spilled context without bringing it back, and forks it', async () => {
    const c = (await postJson(`${srv.url}/v1/contexts`, { prompt: STORY })).json;
    await postJson(`${srv.url}/v1/contexts`, { prompt: 'Once upon a time' });
    await postJson(`${srv.url}/v1/contexts`, { prompt: 'One day' });
    expect((await ctxState(srv, c.id)).spilled).toBe(true);
    const snap = await fetch(`${srv.url}/v1/contexts/${c.id}/snapshot`);
    expect(snap.status).toBe(200);
    expect((await ctxState(srv, c.id)).spilled).toBe(true);
    const restored = await fetch(`${srv.url}/v1/contexts/restore`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: Buffer.from(await snap.arrayBuffer()) });
    expect(restored.status).toBe(201);
    expect(((await restored.json()) as any).tokens).toBe(c.tokens);
    const kids = await postJson(`${srv.url}/v1/contexts/${c.id}/fork?n=1`, {});
    expect(kids.status).toBe(201);
    expect(kids.json.data[0]).toMatchObject({ parent: c.id, tokens: c.tokens });
  });

  it('removes the spill folder when the server stops, and a killed server\'s folder when the next one starts', async () => {
    expect(spillFiles(srv).length).toBeGreaterThan(0);
    await srv.stop();
    expect(existsSync(spillRoot(srv.proc.pid!))).toBe(false);
    const killed = await startServer(['-m', fixtureModel(STORIES), '-threads', '1']);
    const ctx = await postJson(`${killed.url}/v1/contexts`, { prompt: STORY });
    expect(ctx.status).toBe(201);
    // Spilled by hand: a folder as a SIGKILL leaves it.
    mkdirSync(join(spillRoot(killed.proc.pid!), 'spill', 'x'), { recursive: true });
    writeFileSync(join(spillRoot(killed.proc.pid!), 'spill', 'x', 'ctx_1.kv'), 'state');
    killed.proc.kill('SIGKILL');
    await new Promise((r) => killed.proc.once('exit', r));
    expect(existsSync(spillRoot(killed.proc.pid!))).toBe(true);
    const next = await startServer(['-m', fixtureModel(STORIES), '-threads', '1']);
    try {
      expect(existsSync(spillRoot(killed.proc.pid!))).toBe(false);
    } finally {
      await next.stop();
    }
  });
});

describe('context spilling: a full KV cache', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    // One sequence of 512 positions and no retained prompts: the KV cache has room for about two of these contexts.
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2', '-concurrency', '1', '-ctx-size', '512', '-cache-slots', '0']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('spills idle contexts when their cells are needed and restores them on use', async () => {
    const prompt = STORY.repeat(3);
    const reference = await greedy(srv, { prompt: prompt + 'The', svc_retain_prefix: false });
    const made: any[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await postJson(`${srv.url}/v1/contexts`, { prompt });
      expect(r.status).toBe(201);
      made.push(r.json);
    }
    expect(made[0].tokens * 3).toBeGreaterThan(512); // three do not fit: one had to go to disk
    expect((await ctxState(srv, made[0].id)).spilled).toBe(true);
    expect((await ctxState(srv, made[2].id)).spilled).toBeUndefined();

    const out = await greedy(srv, { prompt: prompt + 'The', svc_session: made[0].id });
    expect(out.choices[0].text).toBe(reference.choices[0].text);
    expect((await ctxState(srv, made[0].id)).spilled).toBeUndefined();
  });
});

describe('every resident context in use', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '1', '-concurrency', '2', '-context-slots', '2']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('a third context waits: 429 with Retry-After: 1, then 201 once one is free', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) ids.push((await postJson(`${srv.url}/v1/contexts`, { prompt: STORY })).json.id);
    // Both contexts are bound to running generations: neither can be spilled for a third.
    const ac = new AbortController();
    const busy = ids.map((id) =>
      fetch(`${srv.url}/v1/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, signal: ac.signal,
        body: JSON.stringify({ prompt: `${STORY}The`, max_tokens: 4000, ignore_eos: true, stream: true, svc_session: id }),
      }).then((r) => r.body?.getReader().read()).catch(() => undefined),
    );
    await Promise.all(busy); // both streams are generating
    const third = await fetch(`${srv.url}/v1/contexts`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'Lily' }) });
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toBe('1');
    expect(await third.text()).toBe('');
    ac.abort();
    let made = 0;
    for (let i = 0; i < 50 && made !== 201; i++) {
      made = (await postJson(`${srv.url}/v1/contexts`, { prompt: 'Lily' })).status;
      if (made !== 201) await new Promise((r) => setTimeout(r, 100));
    }
    expect(made).toBe(201);
  });
});

describe('a full KV cache with a request queued on a context', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    // Two sequences of 256 positions: 512 cells, no retained prompts.
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2', '-concurrency', '2', '-ctx-size', '256', '-cache-slots', '0']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('the running requests finish; the queued one, whose context held the cells, is served or refused with 503', async () => {
    const ctx = await postJson(`${srv.url}/v1/contexts`, { prompt: STORY.repeat(3) });
    expect(ctx.status).toBe(201);
    // Two requests near the limit fill both sequences; the context's cells are pinned by the
    // third request, queued behind them. This failed all three with 500 "the KV cache is full".
    const long = (k: number) => postJson(`${srv.url}/v1/completions`, { prompt: `${k} ${STORY.repeat(3)}`, max_tokens: 40, temperature: 0, ignore_eos: true, svc_retain_prefix: false });
    const running = [long(1), long(2)];
    const queued = postJson(`${srv.url}/v1/completions`, { prompt: `${STORY.repeat(3)}The`, max_tokens: 8, temperature: 0, svc_session: ctx.json.id });
    for (const r of await Promise.all(running)) {
      expect(r.status).toBe(200);
      expect(r.json.usage.completion_tokens).toBeGreaterThan(0);
    }
    const q = await queued;
    expect([200, 503]).toContain(q.status);
    if (q.status === 503) {
      expect(q.json.error.message).toMatch(/^the KV cache is full \(its context could not stay loaded/);
      // A wait, not a fault: the client is told when to try again.
      expect(q.headers.get('retry-after')).toBe('1');
    }
    // The context is intact and usable once the others are done.
    const again = await postJson(`${srv.url}/v1/completions`, { prompt: `${STORY.repeat(3)}The`, max_tokens: 8, temperature: 0, svc_session: ctx.json.id });
    expect(again.status).toBe(200);
  });
});

describe('contexts across an unload of their model (keep_alive)', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  const resident = async () => ((await (await fetch(`${srv.url}/api/ps`)).json()) as any).models.length;

  it('wait on disk and come back with the next load: same tokens, same continuation, ids never reused', async () => {
    const a = (await postJson(`${srv.url}/v1/contexts`, { prompt: STORY })).json;
    const twin = (await postJson(`${srv.url}/v1/contexts/${a.id}/fork`, {})).json.data[0];
    const session = await greedy(srv, { prompt: STORY, svc_session: 'chapter' });
    const expected = await greedy(srv, { prompt: STORY, svc_session: twin.id });
    // A local-runner request with a short keep_alive: the model goes once it has been idle that long.
    const g = await postJson(`${srv.url}/api/generate`, { model: '', prompt: 'Once', stream: false, keep_alive: '1s', options: { num_predict: 1 } });
    expect(g.status).toBe(200);
    const deadline = Date.now() + 15_000;
    while ((await resident()) > 0) {
      if (Date.now() > deadline) throw new Error('the model was not unloaded');
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(spillFiles(srv).length).toBeGreaterThanOrEqual(3);

    // The contexts routes load it again; every context is still there.
    expect(await ctxState(srv, a.id)).toMatchObject({ id: a.id, tokens: a.tokens, spilled: true });
    const again = await greedy(srv, { prompt: STORY, svc_session: a.id });
    expect(again.choices[0].text).toBe(expected.choices[0].text);
    expect(again.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
    const resumed = await greedy(srv, { prompt: STORY + session.choices[0].text, svc_session: 'chapter' });
    expect(resumed.usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(session.usage.prompt_tokens);
    const fresh = (await postJson(`${srv.url}/v1/contexts`, { prompt: 'Once' })).json;
    const n = (id: string) => Number(id.replace('ctx_', ''));
    expect(n(fresh.id)).toBeGreaterThan(Math.max(n(a.id), n(twin.id)));
  });

  it("a copy of the same weights at another path keeps its contexts apart: its unload and delete leave the other's alone", async () => {
    const unload = async (model: string) => {
      expect((await postJson(`${srv.url}/api/generate`, { model, prompt: 'Hi', stream: false, keep_alive: 0, options: { num_predict: 1 } })).status).toBe(200);
      const deadline = Date.now() + 15_000;
      while ((await resident()) > 0) {
        if (Date.now() > deadline) throw new Error('the model was not unloaded');
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const first = await greedy(srv, { prompt: STORY, svc_session: 'kept-apart' });
    const expected = await greedy(srv, { prompt: STORY + first.choices[0].text, cache_prompt: false });
    await unload('');
    expect((await postJson(`${srv.url}/api/copy`, { source: 'stories260K', destination: 'mine' })).status).toBe(200);
    // Same ids on the copy (ids are per model): its spill file must not be the original's.
    expect((await postJson(`${srv.url}/v1/contexts`, { model: 'mine', prompt: 'The big red fox jumped over the lazy brown dog' })).status).toBe(201);
    await unload('mine');
    const deleted = await fetch(`${srv.url}/api/delete`, { method: 'DELETE', body: JSON.stringify({ model: 'mine' }) });
    expect(deleted.status).toBe(200);
    // Its contexts, on disk since the unload, went with it: a new copy under the name starts empty.
    expect((await postJson(`${srv.url}/api/copy`, { source: 'stories260K', destination: 'mine' })).status).toBe(200);
    const revived = (await (await fetch(`${srv.url}/v1/contexts?model=mine`)).json()) as { data: unknown[] };
    expect(revived.data).toEqual([]);
    expect((await fetch(`${srv.url}/api/delete`, { method: 'DELETE', body: JSON.stringify({ model: 'mine' }) })).status).toBe(200);
    const again = await greedy(srv, { prompt: STORY + first.choices[0].text, svc_session: 'kept-apart' });
    expect(again.choices[0].text).toBe(expected.choices[0].text);
    expect(again.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
  });

  const unloadNow = async () => {
    expect((await postJson(`${srv.url}/api/generate`, { model: '', prompt: 'Hi', stream: false, keep_alive: 0, options: { num_predict: 1 } })).status).toBe(200);
    const deadline = Date.now() + 15_000;
    while ((await resident()) > 0) {
      if (Date.now() > deadline) throw new Error('the model was not unloaded');
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  it('a request arriving while the unload still writes contexts to disk waits for it: nothing lost, no id reused', async () => {
    const made: string[] = [];
    for (let i = 0; i < 100; i++) made.push((await postJson(`${srv.url}/v1/contexts`, { prompt: `Once upon a time ${i}` })).json.id);
    await unloadNow();
    const next = await postJson(`${srv.url}/v1/contexts`, { prompt: 'Once' });
    const n = (id: string) => Number(id.replace('ctx_', ''));
    expect(n(next.json.id)).toBeGreaterThan(Math.max(...made.map(n)));
    const listed = new Set((((await (await fetch(`${srv.url}/v1/contexts`)).json()) as any).data as Array<{ id: string }>).map((c) => c.id));
    expect(made.filter((id) => !listed.has(id))).toEqual([]);
    for (const id of [...made, next.json.id]) expect((await fetch(`${srv.url}/v1/contexts/${id}`, { method: 'DELETE' })).status).toBe(204);
  });

  it('a stored response deleted while its model is unloaded frees its context at the next load', async () => {
    const r = await postJson(`${srv.url}/v1/responses`, { model: '', input: 'Once upon a time', max_output_tokens: 4, temperature: 0 });
    expect(r.status).toBe(200);
    await unloadNow();
    const spilled = spillFiles(srv).length;
    expect(spilled).toBeGreaterThan(0);
    expect((await fetch(`${srv.url}/v1/responses/${r.json.id}`, { method: 'DELETE' })).status).toBe(200);
    expect((await postJson(`${srv.url}/v1/completions`, { prompt: 'Once', max_tokens: 1 })).status).toBe(200);
    expect(spillFiles(srv).length).toBe(spilled - 1);
  });

  it('any use of the model renews the keep_alive a local-runner request set', async () => {
    expect((await postJson(`${srv.url}/api/generate`, { model: '', prompt: 'Once', stream: false, keep_alive: '2s', options: { num_predict: 1 } })).status).toBe(200);
    for (let i = 0; i < 8; i++) {
      await new Promise((r) => setTimeout(r, 500));
      await greedy(srv, { prompt: 'Once', max_tokens: 1 });
      expect(await resident()).toBe(1);
    }
  });
});
