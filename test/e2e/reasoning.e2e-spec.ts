/**
 * Reasoning models: a template that opens a think block (Qwen3.5's, on a synthetic model) has its
 * thoughts parsed out by llama.cpp's chat parser and returned apart from the answer in every
 * dialect: reasoning_content (chat completions, as llama-server), thinking blocks (messages),
 * `thinking` (local runner), a reasoning item (Responses). Thinking is switched off by each
 * dialect's own field. The random model never closes its thoughts itself (its think tags are
 * suppressed), so a thinking budget does: llama.cpp's budget sampler writes </think> after that
 * many tokens. Every text is checked against the same prompt continued raw.
 */
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { syntheticModel } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

/** Qwen3.5's prompt for one user turn: the generation prompt opens the think block unless thinking is off. */
const OPENED = '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n';
const CLOSED = '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n';
const hi = [{ role: 'user' as const, content: 'hi' }];
/** A budget of 4 counts from the opening tag: the prompt's newline, then 3 tokens of thought, then </think>. */
const BUDGET = 4;
const MAX = 12;

describe('reasoning models (synthetic thinker-tiny, real Qwen3.5 template)', () => {
  let srv: RunningServer;
  let openai: OpenAI;
  let anthropic: Anthropic;
  let ollama: Ollama;
  /** The raw continuation of a prompt, greedy: what the thoughts (or answer) must be. */
  const raw = async (prompt: string, n: number) => (await openai.completions.create({ model: 'thinker', prompt, max_tokens: n, temperature: 0 })).choices[0].text;

  /** The budgeted turn as raw text continues it: 3 thoughts, then (after </think>) the answer. */
  let THOUGHTS = '';
  let ANSWER = '';

  beforeAll(async () => {
    const store = mkdtempSync(join(tmpdir(), 'svc-reasoning-'));
    copyFileSync(syntheticModel('thinker-tiny'), join(store, 'thinker.gguf'));
    copyFileSync(syntheticModel('qwen2.5-tiny'), join(store, 'plain.gguf'));
    srv = await startServer(['-threads', '2', '-store', store, '-m', 'thinker'], { env: { OLLAMA_MODELS: mkdtempSync(join(tmpdir(), 'ollama-')) } });
    openai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused' });
    anthropic = new Anthropic({ baseURL: srv.url, apiKey: 'unused' });
    ollama = new Ollama({ host: srv.url });
    THOUGHTS = await raw(OPENED, BUDGET - 1);
    // llama.cpp's parser trims the answer's leading whitespace (after </think>).
    ANSWER = (await raw(`${OPENED}${THOUGHTS}</think>`, MAX - BUDGET)).trimStart();
    expect(THOUGHTS.trim().length * ANSWER.length).toBeGreaterThan(0);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  describe('chat completions', () => {
    it('returns the thoughts as reasoning_content and the answer as content, streamed or not', async () => {
      const body = { model: 'thinker', messages: hi, max_tokens: MAX, temperature: 0, reasoning_budget_tokens: BUDGET };
      const r = await openai.chat.completions.create(body as never) as OpenAI.ChatCompletion;
      const msg = r.choices[0].message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
      expect([msg.reasoning_content, msg.content, r.choices[0].finish_reason]).toEqual([THOUGHTS, ANSWER, 'length']);

      const stream = await openai.chat.completions.create({ ...body, stream: true } as never) as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>;
      const kinds: string[] = [];
      let thoughts = '';
      let answer = '';
      for await (const chunk of stream) {
        const d = chunk.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined;
        if (d?.reasoning_content) (thoughts += d.reasoning_content), kinds.push('r');
        if (d?.content) (answer += d.content), kinds.push('c');
      }
      expect([thoughts, answer]).toEqual([THOUGHTS, ANSWER]);
      // Every thought comes before the first word of the answer.
      expect(kinds.join('')).toMatch(/^r+c+$/);
    });

    it('greedy thoughts are the prompt continued raw; the opened think block is not in them', async () => {
      const r = await openai.chat.completions.create({ model: 'thinker', messages: hi, max_tokens: 8, temperature: 0 });
      const msg = r.choices[0].message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
      expect(msg.content).toBe('');
      expect(msg.reasoning_content).toBe(await raw(OPENED, 8));
      expect(r.choices[0].finish_reason).toBe('length');
    });

    it('reasoning_effort "none" and chat_template_kwargs.enable_thinking false close the think block: the output is the answer', async () => {
      const on = await openai.chat.completions.create({ model: 'thinker', messages: hi, max_tokens: 8, temperature: 0 });
      // llama.cpp's parser trims the answer's leading whitespace (after </think>).
      const want = (await raw(CLOSED, 8)).trimStart();
      for (const extra of [{ reasoning_effort: 'none' }, { chat_template_kwargs: { enable_thinking: false } }]) {
        const off = await openai.chat.completions.create({ model: 'thinker', messages: hi, max_tokens: 8, temperature: 0, ...extra } as never) as OpenAI.ChatCompletion;
        const msg = off.choices[0].message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
        expect([msg.content, msg.reasoning_content]).toEqual([want, undefined]);
        // "\n\n</think>\n\n" more in the prompt.
        expect(off.usage!.prompt_tokens).toBeGreaterThan(on.usage!.prompt_tokens);
      }
    });

    it('JSON from a reasoning model: it thinks first, then the answer holds the format (it was all read as thoughts)', async () => {
      const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
      const r = await postJson(`${srv.url}/v1/chat/completions`, { messages: hi, max_tokens: 120, temperature: 0, reasoning_budget_tokens: BUDGET, response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
      expect([r.json.choices[0].message.reasoning_content, r.json.choices[0].finish_reason]).toEqual([THOUGHTS, 'stop']);
      expect(typeof JSON.parse(r.json.choices[0].message.content).ok).toBe('boolean');
      // A caller's grammar writes the whole answer: none of it is thoughts; a budget has nothing to close in it.
      const g = await postJson(`${srv.url}/v1/chat/completions`, { messages: hi, max_tokens: 5, svc_grammar: 'root ::= "yes" | "no"' });
      expect(g.json.choices[0].message).toEqual({ role: 'assistant', content: expect.stringMatching(/^(yes|no)$/), refusal: null });
      const both = await postJson(`${srv.url}/v1/chat/completions`, { messages: hi, max_tokens: 5, svc_grammar: 'root ::= "yes"', reasoning_budget_tokens: 2 });
      expect([both.status, both.json.error.message]).toEqual([400, expect.stringMatching(/^a thinking budget cannot be combined with svc_grammar/)]);
    });

    it('reasoning_format "none" leaves the thoughts in the content, the opened tag in front', async () => {
      const r = await openai.chat.completions.create({ model: 'thinker', messages: hi, max_tokens: MAX, temperature: 0, reasoning_budget_tokens: BUDGET, reasoning_format: 'none' } as never) as OpenAI.ChatCompletion;
      const msg = r.choices[0].message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
      expect(msg.reasoning_content).toBeUndefined();
      expect(msg.content).toMatch(new RegExp(`^<think>\\n${THOUGHTS.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}</think>\\s*`));
      expect(msg.content!.endsWith(ANSWER)).toBe(true);
      // The thoughts are content here, so the stop strings apply to them, as in llama-server (they skipped them).
      const stopped = await openai.chat.completions.create({ model: 'thinker', messages: hi, max_tokens: MAX, temperature: 0, reasoning_budget_tokens: BUDGET, reasoning_format: 'none', stop: '</' } as never) as OpenAI.ChatCompletion;
      const whole = msg.content!;
      expect([stopped.choices[0].message.content, stopped.choices[0].finish_reason]).toEqual([whole.slice(0, whole.indexOf('</')), 'stop']);
    });

    it('with tools offered the thoughts still come back (the call parser used to drop them)', async () => {
      const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
      const r = await openai.chat.completions.create({ model: 'thinker', messages: hi, tools, max_tokens: 8, temperature: 0 });
      const msg = r.choices[0].message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
      expect(msg.reasoning_content?.length).toBeGreaterThan(0);
      expect([msg.content, msg.tool_calls, r.choices[0].finish_reason]).toEqual(['', undefined, 'length']);
    });

    it('tools with a JSON response format on this tool-call format: a 400 that says so (it was "invalid grammar")', async () => {
      const tools = [{ type: 'function' as const, function: { name: 'f', parameters: { type: 'object' } } }];
      const chat = await postJson(`${srv.url}/v1/chat/completions`, { model: 'thinker', messages: hi, tools, max_tokens: 8, response_format: { type: 'json_object' } });
      expect([chat.status, chat.json.error.message]).toEqual([400, expect.stringMatching(/^this model's tool-call format cannot be combined with a JSON response format/)]);
      const runner = await postJson(`${srv.url}/api/chat`, { model: 'thinker', messages: hi, tools, stream: false, format: 'json' });
      expect([runner.status, runner.json.error]).toEqual([400, expect.stringMatching(/cannot be combined with a JSON response format/)]);
    });

    it('stop strings are for the answer: the hidden </think> does not match them (the answer came back empty)', async () => {
      expect(ANSWER).not.toMatch(/think>|<\//);
      for (const stop of ['think>', '</']) {
        const r = (await openai.chat.completions.create({ model: 'thinker', messages: hi, max_tokens: MAX, temperature: 0, reasoning_budget_tokens: BUDGET, stop } as never)) as OpenAI.ChatCompletion;
        const msg = r.choices[0].message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
        expect([msg.reasoning_content, msg.content, r.choices[0].finish_reason]).toEqual([THOUGHTS, ANSWER, 'length']);
      }
      const m = await anthropic.messages.create({ model: 'thinker', max_tokens: MAX, messages: hi, temperature: 0, stop_sequences: ['think>'], thinking: { type: 'enabled', budget_tokens: BUDGET } } as Anthropic.MessageCreateParamsNonStreaming);
      expect([m.content, m.stop_reason, m.stop_sequence]).toEqual([[{ type: 'thinking', thinking: THOUGHTS, signature: '' }, { type: 'text', text: ANSWER }], 'max_tokens', null]);
    });

    it('a required or named call is forced, after the thoughts a budget closed or at once with thinking off (it came as free text)', async () => {
      // An integer: the format writes a string parameter as free text up to its closing tag, which a random model never writes.
      const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { days: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['days'] } } }];
      const named = { type: 'function' as const, function: { name: 'get_weather' } };
      for (const [tool_choice, extra] of [['required', { reasoning_effort: 'none' }], [named, { chat_template_kwargs: { enable_thinking: false } }], ['required', { reasoning_budget_tokens: BUDGET }]] as const) {
        const r = await openai.chat.completions.create({ model: 'thinker', messages: hi, tools, tool_choice, max_tokens: 120, temperature: 0, ...extra } as never) as OpenAI.ChatCompletion;
        const msg = r.choices[0].message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
        expect([JSON.stringify(extra), r.choices[0].finish_reason, msg.tool_calls?.length]).toEqual([JSON.stringify(extra), 'tool_calls', 1]);
        expect(Number.isInteger(JSON.parse((msg.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall).function.arguments).days)).toBe(true);
        // With the budget: thoughts, the forced </think>, then the call.
        expect(msg.reasoning_content?.length ?? 0).toEqual('reasoning_budget_tokens' in extra ? expect.any(Number) : 0);
        if ('reasoning_budget_tokens' in extra) expect(msg.reasoning_content!.length).toBeGreaterThan(0);
      }
      const m = await anthropic.messages.create({ model: 'thinker', max_tokens: 120, messages: hi, tools: [{ name: 'get_weather', input_schema: tools[0].function.parameters }], tool_choice: { type: 'any', disable_parallel_tool_use: true }, thinking: { type: 'disabled' } } as Anthropic.MessageCreateParamsNonStreaming);
      expect([m.stop_reason, m.content.map((b) => b.type)]).toEqual(['tool_use', ['tool_use']]);
    });

    it('reasoning_format "none" with a required call or a JSON format: the thoughts in the content, then the call or the JSON (it was "invalid grammar: std::exception")', async () => {
      const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { days: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['days'] } } }];
      const body = { model: 'thinker', messages: hi, max_tokens: 120, temperature: 0, reasoning_budget_tokens: BUDGET, reasoning_format: 'none' };
      const split = (await openai.chat.completions.create({ ...body, reasoning_format: undefined, tools, tool_choice: 'required' } as never)) as OpenAI.ChatCompletion;
      const thoughts = (split.choices[0].message as OpenAI.ChatCompletionMessage & { reasoning_content?: string }).reasoning_content!;
      const call = (await openai.chat.completions.create({ ...body, tools, tool_choice: 'required' } as never)) as OpenAI.ChatCompletion;
      expect([call.choices[0].finish_reason, call.choices[0].message.content, call.choices[0].message.tool_calls]).toEqual(['tool_calls', `<think>\n${thoughts}</think>`, split.choices[0].message.tool_calls!.map((c) => ({ ...c, id: expect.any(String) }))]);
      const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
      const json = (await openai.chat.completions.create({ ...body, response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } } as never)) as OpenAI.ChatCompletion;
      const text = json.choices[0].message.content!;
      expect([json.choices[0].finish_reason, text.startsWith(`<think>\n${THOUGHTS}</think>`)]).toEqual(['stop', true]);
      expect(typeof JSON.parse(text.slice(text.indexOf('</think>') + '</think>'.length)).ok).toBe('boolean');
    });

    it('an earlier answer\'s reasoning_content goes back to the template', async () => {
      // Qwen3.5 shows the thoughts of assistant turns after the last user message (a tool round).
      const turn = (reasoning?: string) => [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: '', ...(reasoning ? { reasoning_content: reasoning } : {}), tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
      ];
      const count = async (messages: unknown[]) => (await postJson(`${srv.url}/v1/chat/completions`, { messages, max_tokens: 1 })).json.usage.prompt_tokens as number;
      expect(await count(turn('Paris is the city asked about.'))).toBeGreaterThan(await count(turn()));
    });

    it('bad reasoning fields are 400s naming the field', async () => {
      const cases: Array<[Record<string, unknown>, RegExp]> = [
        [{ reasoning_effort: 'huge' }, /reasoning_effort must be one of/],
        [{ chat_template_kwargs: { enable_thinking: 'no' } }, /chat_template_kwargs.enable_thinking must be a boolean/],
        [{ reasoning_format: 'verbose' }, /reasoning_format must be/],
      ];
      for (const [extra, message] of cases) {
        const r = await postJson(`${srv.url}/v1/chat/completions`, { messages: hi, max_tokens: 1, ...extra });
        expect(r.status).toBe(400);
        expect(r.json.error).toMatchObject({ type: 'Bad Request', message: expect.stringMatching(message) });
      }
    });

    it('null fields are absent; a budget of 0 is no thinking (it was ignored: the thoughts ran on)', async () => {
      const nulls = await postJson(`${srv.url}/v1/chat/completions`, { messages: hi, max_tokens: 4, temperature: 0, reasoning_format: null, reasoning_effort: null, chat_template_kwargs: null, reasoning_budget_tokens: null });
      expect(nulls.json.choices[0].message.reasoning_content).toBe(await raw(OPENED, 4));
      for (const budget of [{ reasoning_budget_tokens: 0 }, { thinking_budget_tokens: 0 }]) {
        const r = await postJson(`${srv.url}/v1/chat/completions`, { messages: hi, max_tokens: 6, temperature: 0, ...budget });
        expect([r.json.choices[0].message.reasoning_content, r.json.choices[0].message.content]).toEqual([undefined, (await raw(CLOSED, 6)).trimStart()]);
      }
    });

    it('usage counts the thought tokens (completion_tokens_details.reasoning_tokens)', async () => {
      const r = await postJson(`${srv.url}/v1/chat/completions`, { messages: hi, max_tokens: MAX, temperature: 0, reasoning_budget_tokens: BUDGET });
      // The 3 thoughts; the prompt's newline was not generated, and </think> wrote no thought.
      expect(r.json.usage.completion_tokens_details).toEqual({ reasoning_tokens: BUDGET - 1 });
      const plain = await postJson(`${srv.url}/v1/chat/completions`, { model: 'plain', messages: hi, max_tokens: 4 });
      expect(plain.json.usage).not.toHaveProperty('completion_tokens_details');
    });

    it('svc_session continues past a turn with thoughts, which the template leaves out of the history (it was a 400)', async () => {
      const session = `think-${Date.now()}`;
      const first = await postJson(`${srv.url}/v1/chat/completions`, { messages: hi, max_tokens: MAX, temperature: 0, reasoning_budget_tokens: BUDGET, svc_session: session });
      expect(first.status).toBe(200);
      const history = [...hi, { role: 'assistant', content: first.json.choices[0].message.content, reasoning_content: first.json.choices[0].message.reasoning_content }, { role: 'user', content: 'more' }];
      const second = await postJson(`${srv.url}/v1/chat/completions`, { messages: history, max_tokens: 4, temperature: 0, svc_session: session });
      expect(second.status).toBe(200);
      // The same turn without the session: same answer, and the session read the first prompt from its cache.
      const fresh = await postJson(`${srv.url}/v1/chat/completions`, { messages: history, max_tokens: 4, temperature: 0, cache_prompt: false });
      expect(second.json.choices[0].message).toEqual(fresh.json.choices[0].message);
      expect(second.json.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
      // A tool round keeps the first answer's thoughts in the prompt (no user message since); the next
      // user message drops them: the prompt departs inside the first answer, not the last one.
      const loop = `think-loop-${Date.now()}`;
      const a1 = (await postJson(`${srv.url}/v1/chat/completions`, { messages: hi, max_tokens: MAX, temperature: 0, reasoning_budget_tokens: BUDGET, svc_session: loop })).json.choices[0].message;
      const call = { id: 'c1', type: 'function', function: { name: 'get_time', arguments: '{}' } };
      const round = [...hi, { role: 'assistant', content: a1.content, reasoning_content: a1.reasoning_content, tool_calls: [call] }, { role: 'tool', tool_call_id: 'c1', content: 'noon' }];
      const a2 = await postJson(`${srv.url}/v1/chat/completions`, { messages: round, max_tokens: MAX, temperature: 0, reasoning_budget_tokens: BUDGET, svc_session: loop });
      expect(a2.status).toBe(200);
      const a3 = await postJson(`${srv.url}/v1/chat/completions`, { messages: [...round, { role: 'assistant', content: a2.json.choices[0].message.content }, { role: 'user', content: 'thanks' }], max_tokens: 4, temperature: 0, svc_session: loop });
      expect([a3.status, a3.json.error]).toEqual([200, undefined]);
      // With thinking off the template still writes (and later drops) an empty think block: the same holds.
      const off = `think-off-${Date.now()}`;
      const t1 = await postJson(`${srv.url}/v1/chat/completions`, { messages: hi, max_tokens: MAX, temperature: 0, reasoning_effort: 'none', svc_session: off });
      const t2 = await postJson(`${srv.url}/v1/chat/completions`, { messages: [...hi, { role: 'assistant', content: t1.json.choices[0].message.content }, { role: 'user', content: 'more' }], max_tokens: 4, temperature: 0, reasoning_effort: 'none', svc_session: off });
      expect([t1.status, t2.status, t2.json.error]).toEqual([200, 200, undefined]);
      // A prompt that departs before the answer is still refused.
      const other = await postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'bye' }], max_tokens: 2, svc_session: session });
      expect([other.status, other.json.error.message]).toEqual([400, expect.stringMatching(/diverges from it at token/)]);
    });

    it('a context made of messages ending with a reply, and a fork of a session, go on (the template drops the reply\'s think block)', async () => {
      const chat = (messages: unknown[], extra: Record<string, unknown>) => postJson(`${srv.url}/v1/chat/completions`, { messages, max_tokens: 4, temperature: 0, ...extra });
      const expectContinues = async (id: string, messages: unknown[]) => {
        const r = await chat(messages, { svc_session: id });
        // Each was a 400 "holds N tokens and the prompt diverges".
        expect([r.status, r.json.error]).toEqual([200, undefined]);
        expect(r.json.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(5);
        expect(r.json.choices[0].message).toEqual((await chat(messages, { cache_prompt: false })).json.choices[0].message);
      };
      const history = [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }, { role: 'assistant', content: 'Hello!' }];
      const made = (await postJson(`${srv.url}/v1/contexts`, { model: '', messages: history })).json;
      await expectContinues(made.id, [...history, { role: 'user', content: 'how are you' }]);
      const ctx = (await postJson(`${srv.url}/v1/contexts`, { model: '' })).json;
      const first = (await chat(hi, { svc_session: ctx.id, max_tokens: MAX, reasoning_budget_tokens: BUDGET })).json.choices[0].message;
      const kid = (await postJson(`${srv.url}/v1/contexts/${ctx.id}/fork`, {})).json.data[0].id;
      await expectContinues(kid, [...hi, { role: 'assistant', content: first.content, reasoning_content: first.reasoning_content }, { role: 'user', content: 'more' }]);
    });

    it('a model whose template has no think block answers as before: no reasoning_content', async () => {
      const r = await postJson(`${srv.url}/v1/chat/completions`, { model: 'plain', messages: hi, max_tokens: 8, temperature: 0 });
      expect(r.status).toBe(200);
      expect(r.json.choices[0].message).not.toHaveProperty('reasoning_content');
      expect(r.json.choices[0].message.content.length).toBeGreaterThan(0);
    });
  });

  describe('messages', () => {
    it('a thinking block, then the text block, in the answer and in the event stream', async () => {
      const params = { model: 'thinker', max_tokens: MAX, messages: hi, temperature: 0, thinking: { type: 'enabled', budget_tokens: BUDGET } } as Anthropic.MessageCreateParamsNonStreaming;
      const m = await anthropic.messages.create(params);
      expect(m.content).toEqual([
        { type: 'thinking', thinking: THOUGHTS, signature: '' },
        { type: 'text', text: ANSWER },
      ]);
      const stream = anthropic.messages.stream(params as Anthropic.MessageStreamParams);
      const starts: string[] = [];
      stream.on('streamEvent', (e) => {
        if (e.type === 'content_block_start') starts.push(`${e.index}:${e.content_block.type}`);
      });
      const final = await stream.finalMessage();
      expect(final.content).toEqual(m.content);
      expect(starts).toEqual(['0:thinking', '1:text']);
    });

    it('a final assistant turn of thoughts is a prefill: the thinking block holds only their continuation', async () => {
      const m = await anthropic.messages.create({
        model: 'thinker', max_tokens: 6, temperature: 0,
        messages: [...hi, { role: 'assistant', content: [{ type: 'thinking', thinking: 'Let me see', signature: '' }] }],
      } as Anthropic.MessageCreateParamsNonStreaming);
      expect(m.content).toEqual([{ type: 'thinking', thinking: await raw(`${OPENED}Let me see`, 6), signature: '' }]);
      // Thoughts and text prefilled: the reply continues the text; no thoughts of the client's come back (a "\n" block did).
      const both = await anthropic.messages.create({
        model: 'thinker', max_tokens: 6, temperature: 0,
        messages: [...hi, { role: 'assistant', content: [{ type: 'thinking', thinking: 'Let me see', signature: '' }, { type: 'text', text: 'Sure' }] }],
      } as Anthropic.MessageCreateParamsNonStreaming);
      expect(both.content.map((b) => b.type)).toEqual(['text']);
    });

    it('thinking disabled closes the think block; enabled is the default; a bad type is a 400', async () => {
      const base = { model: 'thinker', max_tokens: 8, messages: hi, temperature: 0 };
      const on = await anthropic.messages.create({ ...base, thinking: { type: 'enabled', budget_tokens: 1024 } } as Anthropic.MessageCreateParamsNonStreaming);
      expect(on.content.map((b) => b.type)).toEqual(['thinking']);
      expect((on.content[0] as Anthropic.ThinkingBlock).thinking).toBe(await raw(OPENED, 8));
      const off = await anthropic.messages.create({ ...base, thinking: { type: 'disabled' } } as Anthropic.MessageCreateParamsNonStreaming);
      expect(off.content).toEqual([{ type: 'text', text: (await raw(CLOSED, 8)).trimStart() }]);
      const bad = await postJson(`${srv.url}/v1/messages`, { ...base, thinking: { type: 'sometimes' } });
      expect([bad.status, bad.json.error.message]).toEqual([400, 'thinking.type must be enabled, disabled or adaptive, got "sometimes"']);
    });
  });

  describe('local runner', () => {
    it('/api/chat and /api/generate put the thoughts in `thinking`; think false answers without them', async () => {
      const options = { temperature: 0, num_predict: 6 };
      const thoughts = await raw(OPENED, 6);
      const chat = await ollama.chat({ model: 'thinker', messages: hi, stream: false, options });
      expect([chat.message.thinking, chat.message.content]).toEqual([thoughts, '']);
      const gen = await ollama.generate({ model: 'thinker', prompt: 'hi', stream: false, options });
      expect([gen.thinking, gen.response]).toEqual([thoughts, '']);
      // `context` holds the thoughts too (it held the prompt alone: a follow-up read an empty, open think block).
      const ids = [...gen.context!];
      expect(ids.length).toBe(gen.prompt_eval_count! + gen.eval_count!);
      let ctx: number[] = [];
      for await (const part of await ollama.generate({ model: 'thinker', prompt: 'hi', stream: true, options })) if (part.done) ctx = part.context!;
      expect(ctx).toEqual(ids);

      let streamed = '';
      for await (const part of await ollama.chat({ model: 'thinker', messages: hi, stream: true, options })) {
        streamed += part.message.thinking ?? '';
        expect(part.message.content).toBe('');
      }
      expect(streamed).toBe(thoughts);

      const off = await ollama.chat({ model: 'thinker', messages: hi, think: false, stream: false, options });
      expect([off.message.thinking, off.message.content]).toEqual([undefined, (await raw(CLOSED, 6)).trimStart()]);
      const bad = await postJson(`${srv.url}/api/chat`, { model: 'thinker', messages: hi, think: 'extreme' });
      expect([bad.status, bad.json.error]).toEqual([400, expect.stringMatching(/^think must be true, false/)]);
    });

    it('think on a model that cannot think is a 400, as the local runner answers; think false there is fine', async () => {
      for (const think of [true, 'high']) {
        const r = await postJson(`${srv.url}/api/chat`, { model: 'plain', messages: hi, think, stream: false });
        expect([r.status, r.json.error]).toEqual([400, 'plain does not support thinking']);
      }
      const off = await postJson(`${srv.url}/api/chat`, { model: 'plain', messages: hi, think: false, stream: false, options: { num_predict: 2 } });
      expect(off.status).toBe(200);
    });

    it('/api/show lists the thinking capability for a template with a think block only', async () => {
      expect((await ollama.show({ model: 'thinker' })).capabilities).toContain('thinking');
      expect((await ollama.show({ model: 'plain' })).capabilities).not.toContain('thinking');
    });
  });

  describe('responses', () => {
    it('a reasoning item comes before the message, in the answer and in the event stream, and a chain continues', async () => {
      const body = { model: 'thinker', input: 'hi', max_output_tokens: MAX, temperature: 0, reasoning_budget_tokens: BUDGET } as OpenAI.Responses.ResponseCreateParamsNonStreaming;
      const r = await openai.responses.create(body);
      expect(r.output.map((i) => i.type)).toEqual(['reasoning', 'message']);
      expect((r.output[0] as OpenAI.Responses.ResponseReasoningItem).content).toEqual([{ type: 'reasoning_text', text: THOUGHTS }]);
      expect([r.output_text, r.status]).toEqual([ANSWER, 'incomplete']);
      expect(r.usage!.output_tokens_details.reasoning_tokens).toBe(BUDGET - 1);

      const stream = openai.responses.stream(body as unknown as OpenAI.Responses.ResponseCreateParamsStreaming);
      let thoughts = '';
      stream.on('response.reasoning_text.delta', (e) => (thoughts += e.delta));
      const final = await stream.finalResponse();
      expect(thoughts).toBe(THOUGHTS);
      expect(final.output.map((i) => i.type)).toEqual(['reasoning', 'message']);
      expect(final.output_text).toBe(ANSWER);

      // The next turn carries the answer (thoughts included) on; the reasoning item is also taken back as input.
      const next = await openai.responses.create({ model: 'thinker', previous_response_id: r.id, input: 'more', max_output_tokens: 2 });
      expect(next.status).toBe('incomplete');
      const manual = await openai.responses.create({ model: 'thinker', input: [{ role: 'user', content: 'hi' }, ...(r.output as OpenAI.Responses.ResponseInputItem[]), { role: 'user', content: 'more' }], max_output_tokens: 2, store: false });
      expect(manual.usage!.input_tokens).toBe(next.usage!.input_tokens);
    });

    it('thoughts cut by max_output_tokens are the incomplete item; reasoning.effort none answers without them', async () => {
      const cut = await openai.responses.create({ model: 'thinker', input: 'hi', max_output_tokens: 4, temperature: 0, store: false });
      expect([cut.status, cut.output.map((i) => `${i.type}:${(i as { status?: string }).status}`)]).toEqual(['incomplete', ['reasoning:incomplete']]);
      const off = await openai.responses.create({ model: 'thinker', input: 'hi', max_output_tokens: 4, temperature: 0, store: false, reasoning: { effort: 'none' } } as never) as OpenAI.Responses.Response;
      expect(off.output.map((i) => i.type)).toEqual(['message']);
      expect(off.output_text).toBe((await raw(CLOSED, 4)).trimStart());
    });
  });
});
