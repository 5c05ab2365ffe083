import OpenAI from 'openai';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { RunningServer, startServer } from './helpers/server';

jest.setTimeout(120_000);

/** A long shared system prompt (about 1,500 tokens on stories260K), distinct per tag. */
function longSystem(tag: string): string {
  const words = 'the little girl named Lily loved to play in the park with her big red ball and her friend Tom'.split(' ');
  const out = [tag];
  for (let i = 0; out.length < 1100; i++) out.push(words[(i * 7) % words.length]);
  return out.join(' ');
}

type Usage = OpenAI.CompletionUsage & { svc_cached_prompt_tokens: number; svc_prefill_ms: number };

/** The shared prefix cache: retained prompts are reused by the next request that starts with them. */
describe('prefix cache (stories260K)', () => {
  let srv: RunningServer;
  let client: OpenAI;

  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  const ask = async (system: string, question: string, extra: Record<string, unknown> = {}): Promise<Usage> => {
    const r = await client.chat.completions.create({ model: '', max_tokens: 2, messages: [{ role: 'system', content: system }, { role: 'user', content: question }], ...extra } as any);
    return r.usage as Usage;
  };

  it('the second of two requests sharing a long prefix reports cached tokens and a shorter prefill', async () => {
    const system = longSystem('alpha');
    const cold = await ask(system, 'first question');
    const warm = await ask(system, 'second one');
    expect(cold.prompt_tokens).toBeGreaterThan(1000);
    expect(cold.prompt_tokens_details!.cached_tokens).toBeLessThan(20);
    expect(warm.prompt_tokens_details!.cached_tokens).toBeGreaterThan(1000);
    expect(warm.svc_cached_prompt_tokens).toBe(warm.prompt_tokens_details!.cached_tokens);
    // Everything up to where the questions differ is shared.
    expect(warm.prompt_tokens - warm.svc_cached_prompt_tokens).toBeLessThan(20);
    expect(warm.svc_prefill_ms).toBeLessThan(0.8 * cold.svc_prefill_ms);
  });

  it('svc_retain_prefix false on the first request: the second reuses nothing of it', async () => {
    const system = longSystem('beta');
    const first = await ask(system, 'first question', { svc_retain_prefix: false });
    const second = await ask(system, 'second one');
    expect(first.prompt_tokens).toBeGreaterThan(1000);
    // Only the template's opening tokens, shared with earlier prompts, can match.
    expect(second.prompt_tokens_details!.cached_tokens).toBeLessThan(20);
    // It retained by default, so a third reuses the second.
    const third = await ask(system, 'third one');
    expect(third.svc_cached_prompt_tokens).toBeGreaterThan(1000);
  });

  it("cache_prompt false (llama-server's field) starts from nothing, and what it leaves is kept", async () => {
    const system = longSystem('epsilon');
    await ask(system, 'first question');
    // The retained first prompt matches, but is not used.
    const second = await ask(system, 'second one', { cache_prompt: false });
    expect(second.prompt_tokens).toBeGreaterThan(1000);
    expect(second.svc_cached_prompt_tokens).toBe(0);
    expect(second.prompt_tokens_details!.cached_tokens).toBe(0);
    // Like a llama-server slot, its KV stays for later requests: the same prompt again reuses all of it.
    const third = await ask(system, 'second one');
    expect(third.prompt_tokens - third.svc_cached_prompt_tokens).toBeLessThanOrEqual(2);
    // Unless svc_retain_prefix says otherwise.
    await ask(system, 'fourth one', { cache_prompt: false, svc_retain_prefix: false });
    const fifth = await ask(system, 'fourth one');
    expect(fifth.svc_cached_prompt_tokens).toBeGreaterThan(1000);
    expect(fifth.prompt_tokens - fifth.svc_cached_prompt_tokens).toBeGreaterThan(2);
  });

  it('/v1/completions shares the same cache', async () => {
    const prompt = longSystem('gamma');
    const a = await client.completions.create({ model: '', prompt: `${prompt} one`, max_tokens: 2 });
    const b = await client.completions.create({ model: '', prompt: `${prompt} two`, max_tokens: 2 });
    expect(a.usage!.prompt_tokens_details?.cached_tokens ?? 0).toBeLessThan(20);
    expect(b.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(1000);
  });

  it('a prompt moved out of the KV cache while another request decoded comes back from memory, same text', async () => {
    type Stats = { active: number; prompt_cache: { promotions: number; demotions: number; hostBytes: number; resident: number } };
    const stats = async () => (await (await fetch(`${srv.url}/v1/stats`)).json()) as Stats;
    const prompt = longSystem('delta');
    const greedy = { model: '', max_tokens: 24, temperature: 0 };
    // A long generation runs throughout; the short request below finishes while it decodes.
    const long = client.completions.create({ model: '', prompt: 'Tom', max_tokens: 1000, temperature: 0, ignore_eos: true } as any);
    const first = await client.completions.create({ ...greedy, prompt: `${prompt} one` });
    // Its retained cells are not shared by the running request: they leave the KV cache at its next step.
    let mid = await stats();
    for (let i = 0; i < 50 && mid.prompt_cache.resident > 0; i++) mid = await stats();
    expect(mid.active).toBe(1);
    expect(mid.prompt_cache.resident).toBe(0);
    expect(mid.prompt_cache.hostBytes).toBeGreaterThan(0);
    await long;
    const again = await client.completions.create({ ...greedy, prompt: `${prompt} one` });
    expect(again.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(1000);
    expect((await stats()).prompt_cache.promotions).toBeGreaterThan(mid.prompt_cache.promotions);
    expect(again.choices[0].text).toBe(first.choices[0].text);
  });

  it('once the server is idle, retained prompts leave the KV cache (CPU) and still serve the next match', async () => {
    type PromptCache = { resident: number; demotions: number; promotions: number };
    const stats = async () => ((await (await fetch(`${srv.url}/v1/stats`)).json()) as { prompt_cache: PromptCache }).prompt_cache;
    const idle = async (): Promise<PromptCache> => {
      for (let i = 0; i < 100; i++) {
        const s = await stats();
        if (s.resident === 0) return s;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error(`retained prompts still resident: ${JSON.stringify(await stats())}`);
    };
    const prompt = longSystem('theta');
    const greedy = { model: '', max_tokens: 16, temperature: 0 };
    const before = await stats();
    const first = await client.completions.create({ ...greedy, prompt: `${prompt} one` });
    const after = await idle();
    expect(after.demotions).toBeGreaterThan(before.demotions);
    const again = await client.completions.create({ ...greedy, prompt: `${prompt} one` });
    expect(again.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(1000);
    expect((await stats()).promotions).toBeGreaterThan(after.promotions);
    expect(again.choices[0].text).toBe(first.choices[0].text);
  });

  it('-cache-ram 0: prompts leaving the KV cache are dropped, not kept in memory', async () => {
    const small = await startServer(['-m', fixtureModel(STORIES), '-threads', '2', '-cache-ram', '0']);
    try {
      const c = new OpenAI({ baseURL: `${small.url}/v1`, apiKey: 'x' });
      const prompt = longSystem('zeta');
      await c.completions.create({ model: '', prompt: `${prompt} one`, max_tokens: 2 });
      await c.completions.create({ model: '', prompt: `${longSystem('eta')} two`, max_tokens: 2 });
      const again = await c.completions.create({ model: '', prompt: `${prompt} one`, max_tokens: 2 });
      expect(again.usage!.prompt_tokens_details?.cached_tokens ?? 0).toBeLessThan(20);
      const pc = ((await (await fetch(`${small.url}/v1/stats`)).json()) as { prompt_cache: { hostBytes: number } }).prompt_cache;
      expect(pc.hostBytes).toBe(0);
    } finally {
      await small.stop();
    }
  });
});
