import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { greedyFetch, RunningServer, startServer } from './helpers/server';

jest.setTimeout(120_000);


/** All three dialects meet one core request and one loaded model with one prefix cache. */
describe('three dialects, one engine (stories260K)', () => {
  let srv: RunningServer;
  let openai: OpenAI;
  let anthropic: Anthropic;
  let ollama: Ollama;

  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
    openai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'any-string' });
    anthropic = new Anthropic({ baseURL: srv.url, apiKey: 'any-string', fetch: greedyFetch });
    ollama = new Ollama({ host: srv.url });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('text parts of one message are read as one text, a newline between them, in every dialect (as llama.cpp joins them)', async () => {
    const joined = 'The doc says hi\nwhat';
    const whole = await openai.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: joined }], max_tokens: 1, temperature: 0 });
    const glued = await openai.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'The doc says hiwhat' }], max_tokens: 1, temperature: 0 });
    const want = whole.usage!.prompt_tokens;
    // The test means something only if gluing changes the count.
    expect(glued.usage!.prompt_tokens).not.toBe(want);
    const parts = await openai.chat.completions.create({
      model: 'stories260K',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'The doc says hi' }, { type: 'text', text: 'what' }] }],
      max_tokens: 1,
      temperature: 0,
    });
    expect(parts.usage!.prompt_tokens).toBe(want);
    const blocks = [{ type: 'text' as const, text: 'The doc says hi' }, { type: 'text' as const, text: 'what' }];
    const counted = await anthropic.messages.countTokens({ model: 'stories260K', messages: [{ role: 'user', content: blocks }] });
    expect(counted.input_tokens).toBe(want);
    const docs = await anthropic.messages.countTokens({
      model: 'stories260K',
      messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'content', content: [{ type: 'text', text: 'The doc says hi' }, { type: 'text', text: 'what' }] } }] }],
    });
    expect(docs.input_tokens).toBe(want);
    const responses = await openai.responses.create({ model: 'stories260K', input: [{ role: 'user', content: [{ type: 'input_text', text: 'The doc says hi' }, { type: 'input_text', text: 'what' }] }], max_output_tokens: 1, temperature: 0 });
    const plain = await openai.responses.create({ model: 'stories260K', input: joined, max_output_tokens: 1, temperature: 0 });
    expect(responses.usage!.input_tokens).toBe(plain.usage!.input_tokens);
  });

  it('the same greedy request gives the same text and token counts in every dialect', async () => {
    const content = 'Once upon a time';
    const o = await openai.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content }], max_tokens: 20, temperature: 0 });
    const a = await anthropic.messages.create({ model: 'stories260K', messages: [{ role: 'user', content }], max_tokens: 20 });
    const l = await ollama.chat({ model: 'stories260K', messages: [{ role: 'user', content }], stream: false, options: { num_predict: 20, temperature: 0 } });
    const text = o.choices[0].message.content;
    expect((a.content[0] as Anthropic.TextBlock).text).toBe(text);
    expect(l.message.content).toBe(text);
    // Anthropic's accounting: input_tokens leave out what was read from the cache.
    expect(a.usage.input_tokens + (a.usage.cache_read_input_tokens ?? 0)).toBe(o.usage!.prompt_tokens);
    expect(l.prompt_eval_count).toBe(o.usage!.prompt_tokens);
    expect(a.usage.output_tokens).toBe(o.usage!.completion_tokens);
    expect(l.eval_count).toBe(o.usage!.completion_tokens);
  });

  it('a prefix cached by one dialect is reused by another', async () => {
    // A long, unique system prompt: only these requests can have cached it.
    const system = `You are narrator number ${Date.now()}. ` + 'The children played in the park and the sun was warm. '.repeat(12);
    const user = 'Tell me a story about a cat.';
    const first = await openai.chat.completions.create({
      model: '',
      messages: [{ role: 'system', content: system }, { role: 'user', content: user }],
      max_tokens: 4,
      temperature: 0,
    });
    expect(first.usage!.prompt_tokens).toBeGreaterThan(100);
    const a = await anthropic.messages.create({ model: '', system, messages: [{ role: 'user', content: user + ' A dog too.' }], max_tokens: 4 });
    expect(a.usage.cache_read_input_tokens).toBeGreaterThan(100);
    // The prompt is input_tokens plus what was read from the cache, not counted twice.
    const counted = await anthropic.messages.countTokens({ model: '', system, messages: [{ role: 'user', content: user + ' A dog too.' }] });
    expect(a.usage.input_tokens + a.usage.cache_read_input_tokens!).toBe(counted.input_tokens);
    expect(a.usage.input_tokens).toBeLessThan(counted.input_tokens);
    // Streamed, the final message takes message_delta's split; message_start has the same split
    // (it counted the whole prompt as input, which clients reading usage from it took as such).
    const stream = anthropic.messages.stream({ model: '', system, messages: [{ role: 'user', content: user + ' A dog too.' }], max_tokens: 4 });
    const started: Anthropic.Usage[] = [];
    stream.on('streamEvent', (e) => {
      if (e.type === 'message_start') started.push({ ...e.message.usage });
    });
    const streamed = await stream.finalMessage();
    expect(streamed.usage.input_tokens + streamed.usage.cache_read_input_tokens!).toBe(counted.input_tokens);
    expect(streamed.usage.cache_read_input_tokens).toBeGreaterThan(100);
    expect(started.map((u) => [u.input_tokens, u.cache_read_input_tokens])).toEqual([[streamed.usage.input_tokens, streamed.usage.cache_read_input_tokens]]);

    const before = (await (await fetch(`${srv.url}/v1/stats`)).json()) as any;
    const l = await ollama.chat({ model: '', messages: [{ role: 'system', content: system }, { role: 'user', content: user + ' And a bird.' }], stream: false, options: { num_predict: 4, temperature: 0 } });
    const after = (await (await fetch(`${srv.url}/v1/stats`)).json()) as any;
    expect(after.cached_prompt_tokens - before.cached_prompt_tokens).toBeGreaterThan(100);
    expect(l.prompt_eval_count).toBeGreaterThan(100);

    const back = await openai.chat.completions.create({ model: '', messages: [{ role: 'system', content: system }, { role: 'user', content: user + ' A fish.' }], max_tokens: 4, temperature: 0 });
    expect((back.usage as any).prompt_tokens_details.cached_tokens).toBeGreaterThan(100);
  });
});
