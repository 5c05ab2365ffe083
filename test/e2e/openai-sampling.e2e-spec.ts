import OpenAI from 'openai';
import { NativeModel } from '../../libs/engine/src/backend/native-addon';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { idsByPiece, loadEngineModel, pieceKey } from './helpers/engine';
import { RunningServer, startServer } from './helpers/server';

jest.setTimeout(120_000);

/** Sampling controls on stories260K; token ids are read from the engine's own vocabulary. */
describe('sampling controls (stories260K)', () => {
  let srv: RunningServer;
  let client: OpenAI;
  let model: NativeModel;
  let vocab: Map<string, number[]>;
  const prompt = 'Once upon a time';

  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
    model = await loadEngineModel(fixtureModel(STORIES));
    vocab = idsByPiece(model);
  });
  afterAll(async () => {
    model?.dispose();
    await srv?.stop();
  });

  const complete = async (extra: Record<string, unknown>) => (await client.completions.create({ model: '', prompt, max_tokens: 40, temperature: 0, ...extra } as any)) as any;

  it('seed: the same seed gives the same text, different seeds differ at temperature 1', async () => {
    // The same text needs the same KV layout (README: seeds and the shared KV): back to back and
    // without the prefix cache, or one request may start from the previous one's retained prompt
    // and the other not, depending on whether the idle server dropped it in between.
    const chat = (seed: number) => client.chat.completions.create({ model: '', messages: [{ role: 'user', content: prompt }], max_tokens: 30, temperature: 1, seed, cache_prompt: false } as any) as any;
    const a = await chat(11);
    const b = await chat(11);
    expect(b.choices[0].message.content).toBe(a.choices[0].message.content);
    const seeded = { temperature: 1, seed: 3, cache_prompt: false };
    expect((await complete(seeded)).choices[0].text).toBe((await complete(seeded)).choices[0].text);
    const texts = new Set<string>();
    for (const seed of [1, 2, 3, 4, 5]) texts.add((await complete({ temperature: 1, seed })).choices[0].text);
    expect(texts.size).toBeGreaterThan(1);
  });

  it("a finished request's sampler is handed to the next one with the same options, as new", async () => {
    const reuses = async () => ((await (await fetch(`${srv.url}/v1/stats`)).json()) as { sampler_reuses: number }).sampler_reuses;
    // Penalties, DRY and a seeded draw: any history or RNG state carried over changes the text
    // (no prefix cache: both start from the same cells, as in the test above).
    const opts = { temperature: 1, seed: 7, max_tokens: 40, frequency_penalty: 1.5, presence_penalty: 1, repeat_penalty: 1.3, svc_dry_multiplier: 0.8, cache_prompt: false };
    const first = (await complete(opts)).choices[0].text;
    const before = await reuses();
    const second = (await complete(opts)).choices[0].text;
    expect(await reuses()).toBe(before + 1);
    expect(second).toBe(first);
    expect(first.length).toBeGreaterThan(20);
  });

  it('svc_banned_tokens: banned ids are never sampled', async () => {
    const before = await complete({ logprobs: 0 });
    // Ban every id of the five most frequent pieces of the greedy answer.
    const counts = new Map<string, number>();
    for (const lp of before.choices[0].logprobs.tokens as string[]) counts.set(lp, (counts.get(lp) ?? 0) + 1);
    const pieces = [...counts].sort((x, y) => y[1] - x[1]).slice(0, 5).map(([t]) => t);
    const banned = pieces.flatMap((p) => vocab.get(pieceKey(Array.from(Buffer.from(p)))) ?? []);
    expect(banned.length).toBeGreaterThanOrEqual(5);
    for (const seed of [1, 2]) {
      const r = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: prompt }], max_tokens: 40, temperature: 1, seed, logprobs: true, svc_banned_tokens: banned } as any);
      const got = r.choices[0].logprobs!.content!;
      expect(got.length).toBeGreaterThan(5);
      for (const lp of got) {
        const ids = vocab.get(pieceKey(lp.bytes!)) ?? [];
        // Some id with these bytes is allowed (a banned piece can still be spelled by unbanned byte tokens).
        expect(ids.some((id) => !banned.includes(id))).toBe(true);
      }
    }
  });

  it('logit_bias: a large positive bias makes a token appear; -100 bans it', async () => {
    const [id] = Array.from(model.tokenizeSync(' dog', false, false)).slice(-1);
    const piece = model.tokenToPiece(id, false).toString('utf8');
    const plain = (await complete({})).choices[0].text as string;
    const biased = (await complete({ logit_bias: { [id]: 30 } })).choices[0].text as string;
    const count = (s: string) => s.split(piece).length - 1;
    expect(count(biased)).toBeGreaterThan(count(plain));
    expect(count(biased)).toBeGreaterThan(3);
    const chat = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: prompt }], max_tokens: 20, temperature: 0, logit_bias: { [id]: 100 } });
    expect(count(chat.choices[0].message.content!)).toBeGreaterThan(3);
    // The most likely first token, banned with -100, is replaced.
    const first = (await complete({ logprobs: 0, max_tokens: 1 })).choices[0].logprobs;
    const firstIds = vocab.get(pieceKey(Array.from(Buffer.from(first.tokens[0] as string))))!;
    const bias = Object.fromEntries(firstIds.map((t) => [t, -100]));
    const other = await complete({ logprobs: 0, max_tokens: 1, logit_bias: bias });
    expect(other.choices[0].logprobs.tokens[0]).not.toBe(first.tokens[0]);
  });

  it('a token id past the vocabulary is refused, however large (2^32 + 300 biased token 300), and so is a seed past 2^53', async () => {
    const n = model.info.nVocab;
    for (const body of [{ logit_bias: { [2 ** 32 + 300]: 100 } }, { logit_bias: { [n]: 1 } }, { svc_banned_tokens: [2 ** 32 + 2] }]) {
      const r = await fetch(`${srv.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt, max_tokens: 3, ...body }) });
      expect(r.status).toBe(400);
      expect(((await r.json()) as any).error.message).toMatch(new RegExp(`^token \\d+ \\(logit_bias or svc_banned_tokens\\) is not in the vocabulary \\(ids 0 to ${n - 1}\\)$`));
    }
    for (const seed of [1e20, -2]) {
      const r = await fetch(`${srv.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt, max_tokens: 3, seed }) });
      expect([r.status, ((await r.json()) as any).error.message]).toEqual([400, 'seed must be -1 (random) or an integer from 0 to 9007199254740991']);
    }
  });

  it('seed 4294967295 seeds like any other (it was llama.cpp\'s "random"); -1 asks for a random one', async () => {
    const seeded = { temperature: 1.5, max_tokens: 24, cache_prompt: false };
    const texts = new Set<string>();
    for (let i = 0; i < 3; i++) texts.add((await complete({ ...seeded, seed: 4294967295 })).choices[0].text);
    expect(texts.size).toBe(1);
    const random = new Set<string>();
    for (let i = 0; i < 4; i++) random.add((await complete({ ...seeded, seed: -1 })).choices[0].text);
    expect(random.size).toBeGreaterThan(1);
  });

  it('svc_dry_multiplier, svc_dry_base and svc_dry_allowed_length are applied', async () => {
    const plain = (await complete({ max_tokens: 150 })).choices[0].text;
    const dry = await complete({ max_tokens: 150, svc_dry_multiplier: 0.8, svc_dry_base: 1.75, svc_dry_allowed_length: 2 });
    expect(dry.choices[0].text.length).toBeGreaterThan(0);
    // Greedy stories260K repeats itself within 150 tokens; DRY penalises the repeat, so the text changes.
    expect(dry.choices[0].text).not.toBe(plain);
    const off = await complete({ max_tokens: 150, svc_dry_multiplier: 0, svc_dry_base: 1.75, svc_dry_allowed_length: 2 });
    expect(off.choices[0].text).toBe(plain);
    // Repeats shorter than the allowed length go unpenalised: a length past any repeat leaves the text as it was.
    const long = await complete({ max_tokens: 150, svc_dry_multiplier: 0.8, svc_dry_base: 1.75, svc_dry_allowed_length: 1000 });
    expect(long.choices[0].text).toBe(plain);
    // The base scales the penalty's growth: another base penalises differently.
    const steep = await complete({ max_tokens: 150, svc_dry_multiplier: 0.8, svc_dry_base: 4, svc_dry_allowed_length: 2 });
    expect(steep.choices[0].text).not.toBe(dry.choices[0].text);
  });

  it('user and stream_options are accepted and change nothing', async () => {
    const body = { model: '', messages: [{ role: 'user' as const, content: prompt }], max_tokens: 16, temperature: 0 };
    const plain = await client.chat.completions.create(body);
    const tagged = await client.chat.completions.create({ ...body, user: 'someone' });
    expect(tagged.choices[0].message.content).toBe(plain.choices[0].message.content);
    const stream = await client.chat.completions.create({ ...body, user: 'someone', stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage: any;
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      usage = c.usage ?? usage;
    }
    expect(text).toBe(plain.choices[0].message.content);
    expect(usage.completion_tokens).toBe(plain.usage!.completion_tokens);
  });
});
