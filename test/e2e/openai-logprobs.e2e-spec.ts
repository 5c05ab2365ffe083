import OpenAI from 'openai';
import { NativeContext, NativeModel } from '../../libs/engine/src/backend/native-addon';
import { renderPrompt } from '../../libs/engine/src/prompt/prompt-renderer';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { idsByPiece, loadEngineModel, pieceKey } from './helpers/engine';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(120_000);

/** Log-probabilities on stories260K, checked against the engine itself. */
describe('logprobs (stories260K)', () => {
  let srv: RunningServer;
  let client: OpenAI;
  let model: NativeModel;
  let ctx: NativeContext;
  let vocab: Map<string, number[]>;

  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
    model = await loadEngineModel(fixtureModel(STORIES));
    ctx = await model.createContext({ nCtx: 512, nBatch: 512, nUbatch: 512, nSeqMax: 1, nThreads: 1, nThreadsBatch: 1 });
    vocab = idsByPiece(model);
  });
  afterAll(async () => {
    ctx?.dispose();
    model?.dispose();
    await srv?.stop();
  });

  /**
   * log-softmax of the raw logits after reading `tokens` from position `from`
   * (earlier positions stay in the KV), computed here from the engine's logits.
   * Reading the prompt in one batch and then a token at a time, as the server
   * does, keeps the float rounding the same.
   */
  async function logSoftmaxAfter(tokens: number[], from = 0): Promise<Float64Array> {
    if (from === 0) ctx.clear();
    const n = tokens.length - from;
    const logits = new Uint8Array(n);
    logits[n - 1] = 1;
    const pos = Int32Array.from({ length: n }, (_, i) => from + i);
    const r = await ctx.step({ tokens: Int32Array.from(tokens.slice(from)), pos, seq: new Int32Array(n), logits }, []);
    expect(r.status).toBe(0);
    const raw = ctx.logits(n - 1);
    let max = -Infinity;
    for (const v of raw) max = Math.max(max, v);
    let sum = 0;
    for (const v of raw) sum += Math.exp(v - max);
    const lse = max + Math.log(sum);
    return Float64Array.from(raw, (v) => v - lse);
  }

  it('chat logprobs equal log-softmax of the raw logits, top_logprobs sorted, whatever the sampling', async () => {
    const messages = [{ role: 'user' as const, content: 'Once upon a time' }];
    // Temperature and penalties change what is sampled, never the reported values.
    const r = await client.chat.completions.create({ model: '', messages, max_tokens: 12, temperature: 1.3, seed: 7, frequency_penalty: 1, logprobs: true, top_logprobs: 5 });
    const content = r.choices[0].logprobs!.content!;
    expect(content.length).toBeGreaterThan(5);

    const prompt = renderPrompt(model, { kind: 'chat', messages }, { kind: 'none' }).text;
    const tokens = Array.from(await model.tokenize(prompt, true, true));
    expect(tokens.length).toBe(r.usage!.prompt_tokens);
    let text = '';
    let from = 0;
    for (const lp of content) {
      const ls = await logSoftmaxAfter(tokens, from);
      from = tokens.length;
      expect(Buffer.from(lp.bytes!).toString('utf8')).toBe(lp.token);
      // The sampled token: one of the ids with these bytes, at this log-probability.
      const id = (vocab.get(pieceKey(lp.bytes!)) ?? []).find((t) => Math.abs(ls[t] - lp.logprob) < 1e-3);
      expect(id).toBeDefined();
      const best = Array.from(ls.keys()).sort((a, b) => ls[b] - ls[a]).slice(0, 5);
      expect(lp.top_logprobs).toHaveLength(5);
      lp.top_logprobs.forEach((alt, k) => {
        expect(Math.abs(alt.logprob - ls[best[k]])).toBeLessThan(1e-3);
        expect(Buffer.from(alt.bytes!).equals(model.tokenToPiece(best[k], false))).toBe(true);
        if (k > 0) expect(alt.logprob).toBeLessThanOrEqual(lp.top_logprobs[k - 1].logprob);
      });
      tokens.push(id!);
      text += lp.token;
    }
    expect(text).toBe(r.choices[0].message.content);
  });

  it('logprobs without top_logprobs gives the chosen token only', async () => {
    const r = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Once' }], max_tokens: 4, logprobs: true });
    for (const lp of r.choices[0].logprobs!.content!) {
      expect(lp.logprob).toBeLessThanOrEqual(0);
      expect(lp.top_logprobs).toEqual([]);
    }
    const off = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Once' }], max_tokens: 4 });
    expect(off.choices[0].logprobs).toBeNull();
  });

  it('top_logprobs over 20 and logprobs with stream are 400', async () => {
    const messages = [{ role: 'user', content: 'Once' }];
    const over = await postJson(`${srv.url}/v1/chat/completions`, { messages, logprobs: true, top_logprobs: 21 });
    expect(over.status).toBe(400);
    expect(over.json.error.message).toMatch(/^cannot parse request: top_logprobs/);
    const twenty = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Once' }], max_tokens: 2, logprobs: true, top_logprobs: 20 });
    expect(twenty.choices[0].logprobs!.content![0].top_logprobs).toHaveLength(20);
    const streamed = await postJson(`${srv.url}/v1/chat/completions`, { messages, logprobs: true, stream: true });
    expect(streamed.status).toBe(400);
    expect(streamed.json.error.message).toBe('logprobs is not supported with stream: true');
    await expect(client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'x' }], logprobs: true, stream: true })).rejects.toMatchObject({ status: 400 });
    const completions = await postJson(`${srv.url}/v1/completions`, { prompt: 'Once', logprobs: 21 });
    expect(completions.status).toBe(400);
    const completionsStream = await postJson(`${srv.url}/v1/completions`, { prompt: 'Once', logprobs: 2, stream: true });
    expect(completionsStream.status).toBe(400);
    expect(completionsStream.json.error.message).toBe('logprobs is not supported with stream: true');
  });

  it('/v1/completions logprobs: tokens, token_logprobs, top_logprobs per position, text_offset', async () => {
    const r: any = await client.completions.create({ model: '', prompt: 'Once upon a time', max_tokens: 16, temperature: 0, logprobs: 3 });
    const lp = r.choices[0].logprobs;
    const text: string = r.choices[0].text;
    expect(lp.tokens.length).toBe(16);
    expect(lp.token_logprobs).toHaveLength(16);
    expect(lp.top_logprobs).toHaveLength(16);
    expect(lp.tokens.join('')).toBe(text);
    let offset = 0;
    lp.tokens.forEach((t: string, i: number) => {
      expect(lp.text_offset[i]).toBe(offset);
      expect(text.slice(offset, offset + t.length)).toBe(t);
      offset += t.length;
      const alts = Object.entries(lp.top_logprobs[i]) as Array<[string, number]>;
      expect(alts.length).toBeGreaterThan(0);
      expect(alts.length).toBeLessThanOrEqual(3);
      // Greedy: the chosen token is the most likely one.
      expect(lp.token_logprobs[i]).toBeCloseTo(Math.max(...alts.map(([, v]) => v)), 5);
    });
    // The first position against the engine.
    const ls = await logSoftmaxAfter(Array.from(await model.tokenize('Once upon a time', true, true)));
    expect(lp.token_logprobs[0]).toBeCloseTo(Math.max(...ls), 3);
  });

  it('a stop string keeps its tokens out of logprobs, as out of the text; logprobs null is off', async () => {
    // Greedy "Once upon a time" goes on ", there was a little girl named Lily"; " girl" and " named"
    // are tokens that write only the stop string.
    const r: any = await client.completions.create({ model: '', prompt: 'Once upon a time', max_tokens: 12, temperature: 0, logprobs: 1, stop: [' girl named'] });
    expect(r.choices[0].text).toBe(', there was a little');
    expect(r.choices[0].finish_reason).toBe('stop');
    expect(r.choices[0].logprobs.tokens).toEqual([',', ' there', ' was', ' a', ' little']);
    expect(r.choices[0].logprobs.token_logprobs).toHaveLength(5);
    // Chat: the token that writes the last character before the stop stays, those after it go.
    const chat: any = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 30, temperature: 0, logprobs: true, stop: ['excited'] } as never);
    const content: string = chat.choices[0].message.content;
    const tokens: string[] = chat.choices[0].logprobs.content.map((t: { token: string }) => t.token);
    expect(content.length).toBeGreaterThan(0);
    expect(tokens.join('').startsWith(content)).toBe(true);
    expect(tokens.slice(0, -1).join('').length).toBeLessThan(content.length);
    // logprobs null is "off" (OpenAI's default), so the request may stream.
    const off = await postJson(`${srv.url}/v1/completions`, { prompt: 'Once', max_tokens: 2, logprobs: null, stop: null, stream: true });
    expect(off.status).toBe(200);
    expect(off.text).not.toMatch(/"logprobs":\{/);
  });

  it('a token that is only part of a character is written bytes:\\xNN, offsets count the character once', async () => {
    // The whole "é" token is banned, so the grammar's "été" must be spelled with byte tokens.
    const whole = vocab.get(Buffer.from('é').toString('hex'))!;
    const r: any = await client.completions.create({ model: '', prompt: 'The word is', max_tokens: 8, logprobs: 1, grammar: 'root ::= "été"', svc_banned_tokens: whole } as any);
    expect(r.choices[0].text).toBe('été');
    const lp = r.choices[0].logprobs;
    expect(lp.tokens).toEqual(['bytes:\\xc3', 'bytes:\\xa9', 't', 'bytes:\\xc3', 'bytes:\\xa9']);
    expect(lp.text_offset).toEqual([0, 0, 1, 2, 2]);
    const chat = await client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'x' }], max_tokens: 8, logprobs: true, grammar: 'root ::= "é"', svc_banned_tokens: whole } as any);
    const content = chat.choices[0].logprobs!.content!;
    expect(content.map((c) => c.token)).toEqual(['bytes:\\xc3', 'bytes:\\xa9']);
    expect(content.map((c) => c.bytes)).toEqual([[0xc3], [0xa9]]);
    expect(chat.choices[0].message.content).toBe('é');
  });
});
