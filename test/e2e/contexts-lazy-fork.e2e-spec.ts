import { fixtureModel, STORIES } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

// Forks are lazy (residency.ts): a child holds no sequence until first used.
// Each test writes to a source while a lazy child still reads its cells, then
// checks the child still continues exactly as the source did before the write.

jest.setTimeout(180_000);

const STORY =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. ' +
  'One day, she saw a big red ball under a tree. She ran to get it and kicked it very high. ';
const FIRST = 'Once upon a time, there was a little girl named Lily. ';
const NEXT = STORY + 'The';

async function ctxState(srv: RunningServer, id: string): Promise<any> {
  const r = await fetch(`${srv.url}/v1/contexts/${id}`);
  expect(r.status).toBe(200);
  return r.json();
}

function api(srv: () => RunningServer) {
  const greedy = async (prompt: string, session?: string, max_tokens = 24) => {
    const r = await postJson(`${srv().url}/v1/completions`, { temperature: 0, max_tokens, prompt, ...(session ? { svc_session: session } : {}), svc_retain_prefix: false });
    expect([r.status, r.text.slice(0, 200)]).toEqual([200, expect.any(String)]);
    return r.json as any;
  };
  const create = async (prompt: string) => {
    const r = await postJson(`${srv().url}/v1/contexts`, { prompt });
    expect(r.status).toBe(201);
    return r.json as any;
  };
  const fork = async (id: string, n = 1) => {
    const r = await postJson(`${srv().url}/v1/contexts/${id}/fork?n=${n}`, {});
    expect(r.status).toBe(201);
    return r.json.data as any[];
  };
  const truncate = async (id: string, tokens: number) => {
    const r = await postJson(`${srv().url}/v1/contexts/${id}/truncate`, { tokens });
    expect(r.status).toBe(200);
    return r.json as any;
  };
  const del = async (id: string) => expect((await fetch(`${srv().url}/v1/contexts/${id}`, { method: 'DELETE' })).status).toBe(204);
  /** Greedy text of a context holding `prompt` from scratch: the reference every fork must match. */
  const reference = async (prompt: string, next: string) => {
    const c = await create(prompt);
    const out = (await greedy(next, c.id)).choices[0].text;
    await del(c.id);
    return out;
  };
  return { greedy, create, fork, truncate, del, reference };
}

describe('lazy forks', () => {
  let srv: RunningServer;
  const { greedy, create, fork, truncate, del, reference } = api(() => srv);
  let ref: string;
  let refFirst: string;

  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2', '-concurrency', '4']);
    ref = await reference(STORY, NEXT);
    refFirst = await reference(FIRST, FIRST + 'She');
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('a child keeps the parent’s state after the parent generates and is then truncated', async () => {
    const p = await create(STORY);
    const [kid] = await fork(p.id);
    expect(kid).toMatchObject({ parent: p.id, tokens: p.tokens, pages: p.pages, shared_pages: p.pages });
    expect(kid.spilled).toBeUndefined();
    // The parent appends: the child's positions are untouched, it may stay unbound.
    expect((await greedy(NEXT, p.id)).choices[0].text).toBe(ref);
    // The parent is cut below the child's length: the child must be bound first.
    await truncate(p.id, 1);
    await greedy('Once upon a time, there was a big dog', p.id);
    const out = await greedy(NEXT, kid.id);
    expect(out.choices[0].text).toBe(ref);
    expect(out.usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(p.tokens - 1);
    await del(p.id);
    await del(kid.id);
  });

  it('a child keeps the parent’s state when the parent rewrites its last tokens', async () => {
    const p = await create(STORY);
    const [kid] = await fork(p.id);
    // Diverges inside the last few tokens (allowed as re-tokenization slack): the parent rewrites cells the child reads.
    const r = await greedy(STORY.slice(0, -4) + 'ill and Max', p.id);
    expect(r.usage.prompt_tokens_details.cached_tokens).toBeLessThan(p.tokens);
    expect((await greedy(NEXT, kid.id)).choices[0].text).toBe(ref);
    await del(p.id);
    await del(kid.id);
  });

  it('fork of a fork, then the middle and the root deleted: the grandchild and a shorter sibling keep their state', async () => {
    const p = await create(STORY);
    const [a] = await fork(p.id);
    const [b] = await fork(a.id); // fork of an unbound fork
    expect(b).toMatchObject({ parent: a.id, tokens: p.tokens, shared_pages: p.pages });
    const [short] = await fork(p.id);
    const first = await create(FIRST);
    await truncate(short.id, first.tokens);
    await del(first.id);
    await del(a.id);
    await del(p.id); // hands its sequence to its longest dependent
    expect((await ctxState(srv, b.id)).spilled).toBeUndefined();
    expect((await greedy(NEXT, b.id)).choices[0].text).toBe(ref);
    expect((await greedy(FIRST + 'She', short.id)).choices[0].text).toBe(refFirst);
    await del(b.id);
    await del(short.id);
  });

  it('fork of a bound fork, then the middle deleted', async () => {
    const p = await create(STORY);
    const [a] = await fork(p.id);
    await truncate(p.id, 2); // binds `a`
    const [b] = await fork(a.id);
    await del(a.id);
    expect((await greedy(NEXT, b.id)).choices[0].text).toBe(ref);
    await del(p.id);
    await del(b.id);
  });

  it('snapshot of an unbound child restores to the parent’s greedy text', async () => {
    const p = await create(STORY);
    const [kid] = await fork(p.id);
    const snap = await fetch(`${srv.url}/v1/contexts/${kid.id}/snapshot`);
    expect(snap.status).toBe(200);
    const parentSnap = Buffer.from(await (await fetch(`${srv.url}/v1/contexts/${p.id}/snapshot`)).arrayBuffer());
    const kidSnap = Buffer.from(await snap.arrayBuffer());
    expect(kidSnap.length).toBe(parentSnap.length);
    const restored = await fetch(`${srv.url}/v1/contexts/restore`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: kidSnap });
    expect(restored.status).toBe(201);
    const r: any = await restored.json();
    expect(r.tokens).toBe(p.tokens);
    await truncate(p.id, 0);
    expect((await greedy(NEXT, r.id)).choices[0].text).toBe(ref);
    expect((await greedy(NEXT, kid.id)).choices[0].text).toBe(ref);
    for (const id of [p.id, kid.id, r.id]) await del(id);
  });

  it('a truncated unbound child continues like a fresh context with its tokens', async () => {
    const p = await create(STORY);
    const first = await create(FIRST);
    const [kid] = await fork(p.id);
    const cut = await truncate(kid.id, first.tokens);
    expect(cut).toMatchObject({ tokens: first.tokens, shared_pages: first.pages });
    await greedy(NEXT, p.id); // the parent moves on
    await truncate(p.id, 0); // and is emptied: the child is bound first
    expect((await greedy(FIRST + 'She', kid.id)).choices[0].text).toBe(refFirst);
    for (const id of [p.id, first.id, kid.id]) await del(id);
  });

  it('64 forks each generating, while the parent generates too', async () => {
    const p = await create(STORY);
    const kids = await fork(p.id, 64);
    const [all, parent] = await Promise.all([Promise.all(kids.map((k) => greedy(NEXT, k.id, 8))), greedy(STORY + 'Then the dog', p.id, 8)]);
    expect(parent.choices[0].text.length).toBeGreaterThan(0);
    for (const out of all) {
      expect(out.usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(p.tokens - 1);
      expect(ref.startsWith(out.choices[0].text)).toBe(true); // 8 of the reference's 24 greedy tokens
    }
    await truncate(p.id, 0);
    for (const k of kids) await del(k.id);
    await del(p.id);
  });

  it('a parent a request is generating on forks and snapshots (reads, not writes: they were 409s) as what it holds; forking a child meanwhile works', async () => {
    const p = await create(STORY);
    const [kid] = await fork(p.id);
    const running = fetch(`${srv.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: NEXT, svc_session: p.id, max_tokens: 200, ignore_eos: true, temperature: 0, stream: true }),
    });
    const reader = (await running).body!.getReader();
    await reader.read();
    const [busyKid] = await fork(p.id);
    const snap = await fetch(`${srv.url}/v1/contexts/${p.id}/snapshot`);
    expect(snap.status).toBe(200);
    const snapshot = Buffer.from(await snap.arrayBuffer());
    const [grandkid] = await fork(kid.id);
    expect((await greedy(NEXT, grandkid.id)).choices[0].text).toBe(ref);
    // Taken mid-generation: the prompt prefix the request bound, not the tokens it was writing.
    expect(busyKid.tokens).toBeLessThanOrEqual(kid.tokens);
    expect((await greedy(NEXT, busyKid.id)).choices[0].text).toBe(ref);
    while (!(await reader.read()).done) {
      /* let the writer finish */
    }
    const r = await fetch(`${srv.url}/v1/contexts/restore`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: snapshot });
    const restored = { status: r.status, json: (await r.json()) as any };
    expect([restored.status, restored.json.tokens]).toEqual([201, busyKid.tokens]);
    expect((await greedy(NEXT, restored.json.id)).choices[0].text).toBe(ref);
    expect((await greedy(NEXT, kid.id)).choices[0].text).toBe(ref);
    for (const id of [p.id, kid.id, grandkid.id, busyKid.id, restored.json.id]) await del(id);
  });
});

describe('lazy forks under spill pressure (-context-slots 2)', () => {
  let srv: RunningServer;
  const { greedy, create, fork, del, reference } = api(() => srv);

  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2', '-concurrency', '2', '-context-slots', '2']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('unbound children hold no slot, follow a spilled parent, and bind by bringing it back', async () => {
    const ref = await reference(STORY, NEXT);
    const p = await create(STORY);
    const kids = await fork(p.id, 3);
    const x = await create('One day');
    const y = await create('Once upon a time');
    expect((await ctxState(srv, p.id)).spilled).toBe(true);
    for (const k of kids) expect((await ctxState(srv, k.id)).spilled).toBeUndefined(); // unbound, not on disk
    // A fork of a spilled parent leaves it on disk.
    const [late] = await fork(p.id);
    expect((await ctxState(srv, p.id)).spilled).toBe(true);
    for (const k of [...kids, late]) expect((await greedy(NEXT, k.id)).choices[0].text).toBe(ref);
    // Deleting a spilled parent with an unbound child: the child keeps its state.
    const q = await create(STORY);
    const [orphan] = await fork(q.id);
    const fill = [await create('The end'), await create('A dog')];
    expect((await ctxState(srv, q.id)).spilled).toBe(true);
    await del(q.id);
    expect((await greedy(NEXT, orphan.id)).choices[0].text).toBe(ref);
    for (const id of [p.id, x.id, y.id, late.id, orphan.id, ...fill.map((f) => f.id), ...kids.map((k) => k.id)]) await del(id);
  });
});

describe('lazy forks with one context slot (-context-slots 1)', () => {
  let srv: RunningServer;
  const { greedy, create, fork, truncate, del, reference } = api(() => srv);

  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2', '-context-slots', '1']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('a child binds though it and its source need two slots for a moment (it was a 429 forever)', async () => {
    const ref = await reference(STORY, NEXT);
    const p = await create(STORY);
    const [a, b] = await fork(p.id, 2);
    expect((await greedy(NEXT, a.id)).choices[0].text).toBe(ref);
    // A snapshot of an unbound child, and a truncate of the source below its other child.
    const snap = await fetch(`${srv.url}/v1/contexts/${b.id}/snapshot`);
    expect(snap.status).toBe(200);
    const [c] = await fork(p.id);
    await truncate(p.id, 2);
    expect((await greedy(NEXT, c.id)).choices[0].text).toBe(ref);
    // Back within the budget: one context resident, the others on disk.
    const list = (await (await fetch(`${srv.url}/v1/contexts`)).json()) as { data: Array<{ spilled?: boolean }> };
    expect(list.data.filter((x) => !x.spilled).length).toBeLessThanOrEqual(1);
    for (const id of [p.id, a.id, b.id, c.id]) await del(id);
  });
  it('deleting a spilled source while the one slot is busy: its longest child takes the file (it was a 429)', async () => {
    const ref = await reference(STORY, NEXT);
    const refFirst = await reference(FIRST, FIRST + 'She');
    const p = await create(STORY);
    const [long, short] = await fork(p.id, 2);
    const first = await create(FIRST);
    await del(first.id);
    await truncate(short.id, first.tokens);
    const x = await create('One day');
    expect((await ctxState(srv, p.id)).spilled).toBe(true);
    // x takes the one slot and is busy: p could not come back for its children.
    const running = fetch(`${srv.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'One day the', svc_session: x.id, max_tokens: 200, ignore_eos: true, temperature: 0, stream: true }),
    });
    const reader = (await running).body!.getReader();
    await reader.read();
    expect((await fetch(`${srv.url}/v1/contexts/${p.id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await ctxState(srv, long.id)).spilled).toBe(true);
    // The heir's file holds the source's cells past its own tokens: a snapshot holds only its own,
    // and is read with the one slot still busy, as any spilled context's is (it was a 429).
    const snap = await fetch(`${srv.url}/v1/contexts/${long.id}/snapshot`);
    expect(snap.status).toBe(200);
    while (!(await reader.read()).done) {
      /* let x's request finish */
    }
    const r = await fetch(`${srv.url}/v1/contexts/restore`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: Buffer.from(await snap.arrayBuffer()) });
    const restored = (await r.json()) as { id: string; tokens: number };
    expect([r.status, restored.tokens]).toEqual([201, long.tokens]);
    expect((await greedy(NEXT, restored.id)).choices[0].text).toBe(ref);
    expect((await greedy(NEXT, long.id)).choices[0].text).toBe(ref);
    expect((await greedy(FIRST + 'She', short.id)).choices[0].text).toBe(refFirst);
    for (const id of [long.id, short.id, x.id, restored.id]) await del(id);
  });
});
