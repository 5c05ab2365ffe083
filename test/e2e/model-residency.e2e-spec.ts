import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fixtureModel, STORIES, syntheticModel } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Models resident now, by name, with their expiry (ms since the epoch). */
async function resident(srv: RunningServer): Promise<Map<string, number>> {
  const ps: any = await (await fetch(`${srv.url}/api/ps`)).json();
  return new Map(ps.models.map((m: any) => [m.name, Date.parse(m.expires_at)]));
}

async function until(what: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await what()) return true;
    await sleep(100);
  }
  return false;
}

/** Loading, keep_alive and unloading as the local runner's clients see them (/api/ps, durations, `ollama stop`). */
describe('model residency on the local-runner routes', () => {
  let srv: RunningServer;
  const encoder = syntheticModel('bert-tiny');
  const encoderName = basename(encoder, '.gguf');

  beforeAll(async () => {
    const store = mkdtempSync(join(tmpdir(), 'svc-store-residency-'));
    copyFileSync(syntheticModel('qwen2.5-tiny'), join(store, 'q.gguf'));
    srv = await startServer(['-m', fixtureModel(STORIES), '-store', store, '-embed', encoder, '-threads', '2'], { env: { OLLAMA_MODELS: mkdtempSync(join(tmpdir(), 'o-')) } });
  });
  afterAll(() => srv?.stop());

  it('keep_alive counts from the end of a generation, not its start', async () => {
    // Long enough that a keep_alive counted from the start would run out within about a second of the end.
    const r = await postJson(`${srv.url}/api/generate`, { model: 'q', prompt: 'Once', stream: false, keep_alive: '4s', options: { num_predict: 800, temperature: 1, seed: 3 } });
    const ended = Date.now();
    expect(r.status).toBe(200);
    const expiry = (await resident(srv)).get('q');
    expect(expiry).toBeGreaterThanOrEqual(ended + 3000);
    await sleep(2000);
    expect((await resident(srv)).has('q')).toBe(true);
    expect(await until(async () => !(await resident(srv)).has('q'), 8000)).toBe(true);
  });

  it('load_duration is the part of the load the request waited for, never more than total_duration', async () => {
    expect((await resident(srv)).has('q')).toBe(false);
    const first = postJson(`${srv.url}/api/generate`, { model: 'q', prompt: 'Once', stream: false, keep_alive: 0, options: { num_predict: 2 } });
    await sleep(50);
    const second = postJson(`${srv.url}/api/generate`, { model: 'q', prompt: 'Once', stream: false, keep_alive: 0, options: { num_predict: 2 } });
    const [a, b] = (await Promise.all([first, second])).map((r) => r.json);
    for (const x of [a, b]) expect(x.load_duration).toBeLessThanOrEqual(x.total_duration);
    expect(a.load_duration).toBeGreaterThan(0);
    // The second arrived after the load began: it waited less of it.
    expect(b.load_duration).toBeLessThan(a.load_duration);
  });

  it('`ollama stop` (keep_alive 0, no prompt) unloads an encoder, the -embed one too', async () => {
    const e = await postJson(`${srv.url}/api/embed`, { model: encoderName, input: 'x', keep_alive: -1 });
    expect(e.status).toBe(200);
    expect((await resident(srv)).has(encoderName)).toBe(true);
    const stop = await postJson(`${srv.url}/api/generate`, { model: encoderName, keep_alive: 0, stream: false });
    expect([stop.status, stop.json.done_reason, stop.json.model]).toEqual([200, 'unload', encoderName]);
    expect(await until(async () => !(await resident(srv)).has(encoderName), 5000)).toBe(true);
    // Loaded again at its next use.
    expect((await postJson(`${srv.url}/v1/embeddings`, { model: '', input: 'x' })).status).toBe(200);
  });

  it('a copy to a name that differs from a stored one only in case is refused, leaving the source', async () => {
    const r = await postJson(`${srv.url}/api/copy`, { source: 'q', destination: 'Q' });
    expect([r.status, r.json.error]).toEqual([400, 'a model with that name already exists: q']);
    expect((await postJson(`${srv.url}/api/copy`, { source: 'q', destination: 'q2' })).status).toBe(200);
    // The same spelling again replaces the copy, as the local runner does.
    expect((await postJson(`${srv.url}/api/copy`, { source: 'q', destination: 'q2' })).status).toBe(200);
    const tags: any = await (await fetch(`${srv.url}/api/tags`)).json();
    expect(tags.models.map((m: any) => m.name)).toEqual(expect.arrayContaining(['q', 'q2:latest']));
  });
});
