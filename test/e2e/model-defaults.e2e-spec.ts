/**
 * A model's own PARAMETER and SYSTEM (its manifest's params and system layers, as `ollama create`
 * writes them) apply in every dialect under what the request says, per name: a custom model made
 * FROM another shares its weights file and differs only there. /api/show reports them.
 */
import { mkdtempSync, readFileSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { writeOllamaModel } from './helpers/ollama-store';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(120_000);

const MODEL = 'application/vnd.ollama.image.model';
const SYSTEM = 'You are a teller of short stories for small children.';

describe('model defaults from the manifest', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    const ollama = mkdtempSync(join(tmpdir(), 'ollama-defaults-'));
    const weights = readFileSync(fixtureModel(STORIES));
    writeOllamaModel(ollama, 'plain:latest', [{ mediaType: MODEL, data: weights }]);
    // Its own file (padded), never loaded by these tests.
    writeOllamaModel(ollama, 'idle:latest', [{ mediaType: MODEL, data: Buffer.concat([weights, Buffer.alloc(32)]) }]);
    writeOllamaModel(ollama, 'tuned:latest', [
      { mediaType: MODEL, data: weights },
      { mediaType: 'application/vnd.ollama.image.params', data: Buffer.from(JSON.stringify({ temperature: 0, stop: ['Lily'], num_ctx: 4096 })) },
      { mediaType: 'application/vnd.ollama.image.system', data: Buffer.from(SYSTEM) },
      { mediaType: 'application/vnd.ollama.image.license', data: Buffer.from('MIT, for the test') },
    ]);
    // plain lists first (folder order) but is older: /api/tags puts the newest first.
    const manifest = (name: string) => join(ollama, 'manifests', 'registry.ollama.ai', 'library', name, 'latest');
    utimesSync(manifest('plain'), new Date('2024-01-01'), new Date('2024-01-01'));
    utimesSync(manifest('tuned'), new Date('2025-01-01'), new Date('2025-01-01'));
    utimesSync(manifest('idle'), new Date('2023-01-01'), new Date('2023-01-01'));
    srv = await startServer(['-threads', '2', '-store', mkdtempSync(join(tmpdir(), 'svc-defaults-'))], { env: { OLLAMA_MODELS: ollama } });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  const generate = (model: string, options: object = {}) => postJson(`${srv.url}/api/generate`, { model, prompt: 'Once upon a time', raw: true, stream: false, options: { num_predict: 24, ...options } });

  it("takes the params' sampling and stop where the request says nothing, and the request's where it does", async () => {
    const greedy = (await generate('plain', { temperature: 0 })).json;
    expect(greedy.response).toContain('Lily');
    const tuned = (await generate('tuned')).json;
    // temperature 0 and stop "Lily" from the params: the greedy text, cut before the stop.
    expect([tuned.response, tuned.done_reason]).toEqual([greedy.response.slice(0, greedy.response.indexOf('Lily')), 'stop']);
    const own = (await generate('tuned', { stop: ['little'] })).json;
    expect([own.response, own.done_reason]).toEqual([greedy.response.slice(0, greedy.response.indexOf('little')), 'stop']);
    // The same through /v1: the request's stop wins, and without one the model's applies.
    const v1 = (await postJson(`${srv.url}/v1/completions`, { model: 'tuned', prompt: 'Once upon a time', max_tokens: 24 })).json;
    expect([v1.choices[0].text, v1.choices[0].finish_reason]).toEqual([tuned.response, 'stop']);
  });

  it('puts the SYSTEM first in a conversation without a system turn, in every dialect', async () => {
    const messages = [{ role: 'user', content: 'Tell me a story.' }];
    const count = async (model: string, msgs: object[]) =>
      (await postJson(`${srv.url}/api/chat`, { model, messages: msgs, stream: false, options: { num_predict: 1 } })).json.prompt_eval_count as number;
    const withModelSystem = await count('tuned', messages);
    expect(withModelSystem).toBe(await count('plain', [{ role: 'system', content: SYSTEM }, ...messages]));
    expect(withModelSystem).toBeGreaterThan(await count('plain', messages));
    // A system turn of the request's own replaces it (a developer turn too, as newer clients send it).
    const own = [{ role: 'system', content: 'Be brief.' }, ...messages];
    expect(await count('tuned', own)).toBe(await count('plain', own));
    const dev = [{ role: 'developer', content: 'Be brief.' }, ...messages];
    const devCount = async (model: string) => (await postJson(`${srv.url}/v1/chat/completions`, { model, messages: dev, max_tokens: 1 })).json.usage.prompt_tokens;
    expect(await devCount('tuned')).toBe(await devCount('plain'));
    const chat = (await postJson(`${srv.url}/v1/chat/completions`, { model: 'tuned', messages, max_tokens: 1 })).json;
    expect(chat.usage.prompt_tokens).toBe(withModelSystem);
    const msg = (await postJson(`${srv.url}/v1/messages`, { model: 'tuned', messages, max_tokens: 1 })).json;
    expect(msg.usage.input_tokens + (msg.usage.cache_read_input_tokens ?? 0)).toBe(withModelSystem);
  });

  it('a context made from messages holds the SYSTEM too, so svc_session continues it', async () => {
    const messages = [{ role: 'user', content: 'Tell me a story.' }];
    const ctx = await postJson(`${srv.url}/v1/contexts`, { model: 'tuned', messages });
    expect(ctx.status).toBe(201);
    const chat = await postJson(`${srv.url}/v1/chat/completions`, { model: 'tuned', messages, max_tokens: 1, svc_session: ctx.json.id });
    expect(chat.status).toBe(200);
    expect(chat.json.usage.prompt_tokens).toBe(ctx.json.tokens);
    expect(chat.json.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
    expect((await fetch(`${srv.url}/v1/contexts/${ctx.json.id}?model=tuned`, { method: 'DELETE' })).status).toBe(204);
  });

  it('/api/show reports the parameters, system and license', async () => {
    const show = (await postJson(`${srv.url}/api/show`, { model: 'tuned' })).json;
    expect(show.system).toBe(SYSTEM);
    expect(show.license).toBe('MIT, for the test');
    expect(show.parameters.split('\n')).toEqual([`${'num_ctx'.padEnd(30)} 4096`, `${'stop'.padEnd(30)} "Lily"`, `${'temperature'.padEnd(30)} 0`]);
    expect(show.modelfile).toContain(`SYSTEM """${SYSTEM}"""`);
    expect(show.modelfile).toContain(`PARAMETER ${'stop'.padEnd(30)} "Lily"`);
    // A fully qualified name finds the listed one.
    expect((await postJson(`${srv.url}/api/show`, { model: 'registry.ollama.ai/library/tuned:latest' })).json.system).toBe(SYSTEM);
    const plain = (await postJson(`${srv.url}/api/show`, { model: 'library/plain' })).json;
    expect([plain.system, plain.parameters]).toEqual(['', '']);
    // Never loaded, yet its size is known from the file's tensor table (it was '' until loaded).
    const idle = (await postJson(`${srv.url}/api/show`, { model: 'idle' })).json;
    expect([idle.details.parameter_size, idle.model_info['general.parameter_count']]).toEqual(['293K', 292800]);
    const ps = (await (await fetch(`${srv.url}/api/ps`)).json()) as { models: Array<{ name: string }> };
    expect(ps.models.map((m) => m.name)).not.toContain('idle:latest');
    const tags = (await (await fetch(`${srv.url}/api/tags`)).json()) as { models: Array<{ name: string; details: { parameter_size: string } }> };
    expect(tags.models.find((m) => m.name === 'idle:latest')?.details.parameter_size).toBe('293K');
  });

  it('/api/tags lists the newest first', async () => {
    const tags = (await (await fetch(`${srv.url}/api/tags`)).json()) as { models: Array<{ name: string; modified_at: string }> };
    expect(tags.models.map((m) => [m.name, m.modified_at])).toEqual([
      ['tuned:latest', '2025-01-01T00:00:00.000Z'],
      ['plain:latest', '2024-01-01T00:00:00.000Z'],
      ['idle:latest', '2023-01-01T00:00:00.000Z'],
    ]);
  });
});
