import OpenAI from 'openai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fixtureModel, ROOT, STORIES } from './helpers/fixtures';
import { RunningServer, startServer } from './helpers/server';

jest.setTimeout(120_000);

describe('chat-completions dialect on the real engine (stories260K)', () => {
  let srv: RunningServer;
  let client: OpenAI;

  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-concurrency', '4', '-threads', '2']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'any-string' });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('greedy completion of "Once upon a time" equals llama.cpp\'s own output', async () => {
    const ref = JSON.parse(readFileSync(join(ROOT, 'test', 'fixtures', 'reference', 'stories260K-once-upon-a-time.json'), 'utf8'));
    const r = await client.completions.create({ model: '', prompt: ref.prompt, max_tokens: ref.n_predict, temperature: 0 });
    expect(r.object).toBe('text_completion');
    expect(r.choices[0].text.startsWith(', there was a little girl named Lily.')).toBe(true);
    // llama.cpp's tool may stop at end-of-generation earlier: compare the common length.
    const n = Math.min(ref.text.length, r.choices[0].text.length);
    expect(r.choices[0].text.slice(0, n)).toBe(ref.text.slice(0, n));
    expect(n).toBeGreaterThan(40);
  });

  it('answers a chat completion with usage', async () => {
    const r = await client.chat.completions.create({
      model: 'stories260K',
      messages: [{ role: 'user', content: 'Once upon a time' }],
      max_tokens: 20,
      temperature: 0,
    });
    expect(r.id).toMatch(/^chatcmpl-/);
    expect(r.object).toBe('chat.completion');
    expect(r.model).toBe('stories260K');
    expect(r.choices[0].message.role).toBe('assistant');
    // The client's type requires it, as the API always sends it.
    expect(r.choices[0].message.refusal).toBeNull();
    expect(typeof r.choices[0].message.content).toBe('string');
    expect(['stop', 'length']).toContain(r.choices[0].finish_reason);
    const u = r.usage as any;
    expect(u.prompt_tokens).toBeGreaterThan(0);
    expect(u.completion_tokens).toBeGreaterThan(0);
    expect(u.completion_tokens).toBeLessThanOrEqual(20);
    expect(u.total_tokens).toBe(u.prompt_tokens + u.completion_tokens);
    expect(typeof u.prompt_tokens_details.cached_tokens).toBe('number');
    expect(typeof u.svc_prefill_ms).toBe('number');
    expect(typeof u.svc_decode_ms).toBe('number');
    expect(typeof u.svc_cached_prompt_tokens).toBe('number');
  });

  it('streams chat chunks ending with a usage chunk and [DONE], same text as unstreamed', async () => {
    const body = { model: '', messages: [{ role: 'user' as const, content: 'Once upon a time' }], max_tokens: 24, temperature: 0 };
    const whole = await client.chat.completions.create(body);
    const stream = await client.chat.completions.create({ ...body, stream: true });
    let text = '';
    let last: any;
    let chunks = 0;
    for await (const c of stream) {
      chunks++;
      expect(c.object).toBe('chat.completion.chunk');
      text += c.choices[0]?.delta?.content ?? '';
      last = c;
    }
    expect(chunks).toBeGreaterThan(2);
    expect(text).toBe(whole.choices[0].message.content);
    expect(last.choices[0].finish_reason).toBe(whole.choices[0].finish_reason);
    expect(last.choices[0].delta).toEqual({});
    expect(last.usage.completion_tokens).toBe(whole.usage!.completion_tokens);

    const raw = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }) });
    expect(raw.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const frames = (await raw.text()).trim().split('\n\n');
    expect(frames[frames.length - 1]).toBe('data: [DONE]');
  });

  it('streams plain completions', async () => {
    const whole = await client.completions.create({ model: '', prompt: 'Once upon a time', max_tokens: 16, temperature: 0 });
    const stream = await client.completions.create({ model: '', prompt: 'Once upon a time', max_tokens: 16, temperature: 0, stream: true });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.text ?? '';
    expect(text).toBe(whole.choices[0].text);
  });

  it('echoes the prompt in front of a plain completion, streamed or not', async () => {
    const ask = { model: '', prompt: 'Once upon a time', max_tokens: 8, temperature: 0 };
    const plain = await client.completions.create(ask);
    const echoed = await client.completions.create({ ...ask, echo: true });
    expect(echoed.choices[0].text).toBe(`Once upon a time${plain.choices[0].text}`);
    expect(echoed.usage).toMatchObject({ prompt_tokens: plain.usage!.prompt_tokens, completion_tokens: plain.usage!.completion_tokens });
    let text = '';
    for await (const c of await client.completions.create({ ...ask, echo: true, stream: true })) text += c.choices[0]?.text ?? '';
    expect(text).toBe(echoed.choices[0].text);
    await expect(client.completions.create({ ...ask, echo: true, logprobs: 2 })).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/echo cannot be combined with logprobs/) });
  });

  it('honours max_completion_tokens over max_tokens and reports length', async () => {
    const r = await client.chat.completions.create({
      model: '',
      messages: [{ role: 'user', content: 'Once upon a time' }],
      max_tokens: 50,
      max_completion_tokens: 3,
      temperature: 0,
    });
    expect(r.usage!.completion_tokens).toBe(3);
    expect(r.choices[0].finish_reason).toBe('length');
  });

  it('stops at a stop string split across tokens and never emits it', async () => {
    const base = { model: '', prompt: 'Once upon a time', max_tokens: 40, temperature: 0 };
    const probe: any = await client.completions.create({ ...base, logprobs: 0 } as any);
    const tokens: string[] = probe.choices[0].logprobs.tokens;
    // Find adjacent tokens whose joint text gives a stop string straddling their boundary.
    let stop = '';
    let before = '';
    for (let i = 2; i < tokens.length - 1; i++) {
      const a = tokens[i];
      const b = tokens[i + 1];
      if (a.length >= 2 && b.length >= 2 && !a.startsWith('bytes:') && !b.startsWith('bytes:')) {
        stop = a.slice(-2) + b.slice(0, 2);
        before = tokens.slice(0, i).join('') + a.slice(0, -2);
        break;
      }
    }
    expect(stop.length).toBe(4);
    const full = tokens.join('');
    const expected = full.slice(0, full.indexOf(stop));
    expect(expected.length).toBeLessThanOrEqual(before.length);
    const r = await client.completions.create({ ...base, stop: [stop] });
    expect(r.choices[0].text).toBe(expected);
    expect(r.choices[0].text.includes(stop)).toBe(false);
    expect(r.choices[0].finish_reason).toBe('stop');
    const s = await client.completions.create({ ...base, stop: [stop], stream: true });
    let streamed = '';
    for await (const c of s) streamed += c.choices[0]?.text ?? '';
    expect(streamed).toBe(expected);
  });

  it('lists and finds models loosely', async () => {
    const list = await client.models.list();
    const ids = list.data.map((m) => m.id);
    expect(ids).toContain('stories260K');
    const entry: any = list.data.find((m) => m.id === 'stories260K');
    expect(entry.object).toBe('model');
    expect(entry.capabilities).toEqual(['completion']);
    const one: any = await client.models.retrieve('stories260k:latest');
    expect(one.id).toBe('stories260K');
    await expect(client.models.retrieve('nope')).rejects.toMatchObject({ status: 404 });
  });

  it('reports health, version, stats and metrics', async () => {
    const h = (await (await fetch(`${srv.url}/healthz`)).json()) as any;
    expect(h).toMatchObject({ status: 'ok', model: 'stories260K', version: '0.3.0', backend: 'cpu', vision: false });
    expect(h.id).toBe('sha256:270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d');
    expect(typeof h.instance).toBe('string');
    expect(await (await fetch(`${srv.url}/api/version`)).json()).toEqual({ version: '0.3.0' });
    // The local runner's command-line client sends HEAD / before every command and stops on a 404.
    const head = await fetch(`${srv.url}/`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await (await fetch(`${srv.url}/`)).text()).toBe('svc is running');
    const stats = (await (await fetch(`${srv.url}/v1/stats`)).json()) as any;
    expect(stats.model).toBe('stories260K');
    expect(stats.generated_tokens).toBeGreaterThan(0);
    const m = await (await fetch(`${srv.url}/metrics`)).text();
    for (const name of ['svc_http_requests_total', 'svc_generated_tokens_total', 'svc_queue_depth', 'svc_batch_tokens_bucket', 'svc_time_to_first_token_seconds_bucket', 'svc_http_request_duration_seconds_bucket', 'svc_nodejs_eventloop_lag_seconds', 'svc_process_resident_memory_bytes']) {
      expect(m).toContain(name);
    }
    // Running totals are counters, as their _total names say (they were typed gauge); levels are gauges.
    for (const name of ['svc_requests_total', 'svc_requests_rejected_total', 'svc_prompt_tokens_total', 'svc_generated_tokens_total', 'svc_decode_steps_total', 'svc_shared_steps_total']) {
      expect(m).toContain(`# TYPE ${name} counter`);
    }
    expect(m).toContain('# TYPE svc_queue_depth gauge');
  });

  /**
   * An idle server's JavaScript thread sleeps: each wake-up on a CPU whose cores run decode
   * threads takes a core from them. prom-client's event-loop lag monitor alone woke it 100
   * times a second at its default resolution (about 200 context switches in these 2 s; ~20 now).
   */
  (process.platform === 'linux' ? it : it.skip)('leaves its JavaScript thread asleep while idle', async () => {
    const pid = srv.proc.pid as number;
    const switches = () => {
      const status = readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8');
      return ['voluntary_ctxt_switches', 'nonvoluntary_ctxt_switches'].reduce((n, k) => n + Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1]), 0);
    };
    await new Promise((r) => setTimeout(r, 500)); // retained prompts leave the KV cache once idle
    const before = switches();
    await new Promise((r) => setTimeout(r, 2000));
    expect(switches() - before).toBeLessThan(80);
  });
});
