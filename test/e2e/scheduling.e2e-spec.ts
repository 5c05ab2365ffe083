import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { connect, Socket } from 'node:net';
import { Agent, request } from 'node:http';
import OpenAI from 'openai';
import { fixtureModel, ROOT, STORIES, syntheticModel } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(180_000);

const PROMPTS = ['Once upon a time', 'The little dog', 'One day, a girl named Sue', 'Tom and his mom went'];

async function stats(url: string): Promise<any> {
  return (await fetch(`${url}/v1/stats`)).json();
}

async function until(pred: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('continuous batching', () => {
  let srv: RunningServer;
  let client: OpenAI;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-concurrency', '4', '-threads', '2', '-cache-slots', '0']);
    client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  const run = (prompt: string) => client.completions.create({ model: '', prompt, max_tokens: 200, temperature: 0, ignore_eos: true } as any);

  it('serves concurrent requests in shared batches, each with the text it gets alone', async () => {
    const alone: string[] = [];
    for (const p of PROMPTS) alone.push((await run(p)).choices[0].text);
    const before = await stats(srv.url);
    const together = await Promise.all(PROMPTS.map(run));
    const after = await stats(srv.url);
    together.forEach((r, i) => expect(r.choices[0].text).toBe(alone[i]));
    expect(after.shared_steps).toBeGreaterThan(before.shared_steps);
    expect(after.max_sequences_in_step).toBeGreaterThanOrEqual(2);
    const metrics = await (await fetch(`${srv.url}/metrics`)).text();
    expect(metrics).toMatch(/svc_shared_steps_total\{model="stories260K"\} [1-9]/);
  });

  it('frees the sequence when a client disconnects mid-stream', async () => {
    const before = await stats(srv.url);
    const ac = new AbortController();
    const res = await fetch(`${srv.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 1900, temperature: 0, ignore_eos: true, stream: true }),
      signal: ac.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    await reader.read();
    ac.abort();
    await until(async () => {
      const s = await stats(srv.url);
      return s.active === 0 && s.cancelled > before.cancelled;
    });
    const s = await stats(srv.url);
    // It stopped long before its 1900 tokens.
    expect(s.generated_tokens - before.generated_tokens).toBeLessThan(1900);
    // Counted as a request all the same (it was missing from the counter): 499, client closed request.
    const metrics = await (await fetch(`${srv.url}/metrics`)).text();
    expect(metrics).toMatch(/svc_http_requests_total\{method="POST",route="\/v1\/completions",status="499"\} [1-9]/);
  });

  it('a named session whose client left mid-answer keeps its prompt: the same request again runs (it was a 400 "diverges")', async () => {
    const body = { prompt: 'Once upon a time', max_tokens: 1900, temperature: 0, ignore_eos: true, stream: true, svc_session: 'left' };
    const ac = new AbortController();
    const res = await fetch(`${srv.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: ac.signal });
    const reader = res.body!.getReader();
    await reader.read();
    await reader.read();
    ac.abort();
    await until(async () => (await stats(srv.url)).active === 0);
    const again = await postJson(`${srv.url}/v1/completions`, { ...body, stream: false, max_tokens: 8 });
    expect(again.status).toBe(200);
    // Its prompt came from the context; the answer equals the one the prompt gets alone.
    expect(again.json.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
    const alone = await postJson(`${srv.url}/v1/completions`, { prompt: body.prompt, max_tokens: 8, temperature: 0, ignore_eos: true, svc_retain_prefix: false });
    expect(again.json.choices[0].text).toBe(alone.json.choices[0].text);
  });

  it('a non-streamed request whose client leaves is cancelled without an error in the log', async () => {
    const before = await stats(srv.url);
    const ac = new AbortController();
    const gone = fetch(`${srv.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 1900, temperature: 0 }),
      signal: ac.signal,
    }).catch(() => undefined);
    await until(async () => (await stats(srv.url)).active === 1);
    ac.abort();
    await gone;
    await until(async () => {
      const st = await stats(srv.url);
      return st.active === 0 && st.cancelled > before.cancelled;
    });
    await new Promise((r) => setTimeout(r, 100));
    // It was logged as a 500 "generation ended without finishing" before: no fault of the server's.
    expect(srv.logs()).not.toMatch(/ERROR/);
  });
});

describe('KV operations beside a long generation', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    // One decode thread on a machine with more: chains stream and run up to a second (on all
    // cores they run 100 ms, and the wait was that).
    srv = await startServer(['-m', syntheticModel('qwen2.5-tiny'), '-concurrency', '2', '-threads', '1']);
  });
  afterAll(() => srv?.stop());

  it('a context created (or a first responses turn) does not wait out the running chain of decode steps', async () => {
    // Its yield request came between two steps and was cleared by the next: ~1 s each (the chain's limit).
    const long = postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], max_tokens: 4000, temperature: 1, seed: 1, svc_banned_tokens: [151643, 151644, 151645] });
    await until(async () => (await stats(srv.url)).active === 1);
    const timed = async (path: string, body: unknown) => {
      const t = performance.now();
      const r = await postJson(`${srv.url}${path}`, body);
      expect(r.status).toBeLessThan(300);
      return performance.now() - t;
    };
    const created: number[] = [];
    const responses: number[] = [];
    for (let i = 0; i < 2; i++) {
      created.push(await timed('/v1/contexts', { prompt: 'hello' }));
      responses.push(await timed('/v1/responses', { input: 'yo', max_output_tokens: 2 }));
    }
    expect((await stats(srv.url)).active).toBe(1); // the long one still ran throughout
    expect(Math.max(...created, ...responses)).toBeLessThan(500);
    expect((await long).status).toBe(200);
  });
  it('a context whose client leaves during its prefill is not made (the client could never learn its id)', async () => {
    const list = async () => ((await (await fetch(`${srv.url}/v1/contexts`)).json()) as any).data as unknown[];
    const before = (await list()).length;
    const all = (await stats(srv.url)).contexts;
    for (let i = 0; i < 2; i++) {
      const ac = new AbortController();
      const sent = fetch(`${srv.url}/v1/contexts`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'hello world '.repeat(1500) }), signal: ac.signal }).catch(() => undefined);
      await until(async () => (await stats(srv.url)).active === 1);
      ac.abort();
      await sent;
    }
    await until(async () => (await stats(srv.url)).active === 0);
    expect((await list()).length).toBe(before);
    expect((await stats(srv.url)).contexts).toBe(all);
  });
});

describe('queue bound', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-concurrency', '1', '-queue', '1', '-threads', '2']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('answers 429 with Retry-After: 1 and an empty body past the bound', async () => {
    const long = { prompt: 'Once upon a time', max_tokens: 1900, temperature: 0, ignore_eos: true };
    const running = postJson(`${srv.url}/v1/completions`, long);
    await until(async () => (await stats(srv.url)).active === 1);
    const queued = postJson(`${srv.url}/v1/completions`, { ...long, max_tokens: 4 });
    await until(async () => (await stats(srv.url)).queued === 1);
    const refused = await postJson(`${srv.url}/v1/completions`, long);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(refused.text).toBe('');
    expect((await running).status).toBe(200);
    expect((await queued).status).toBe(200);
  });

  it('a burst that arrives at once is held to the bound too (it all landed in the queue before any was admitted)', async () => {
    const long = { prompt: 'Once upon a time', max_tokens: 400, temperature: 0, ignore_eos: true };
    const before = await stats(srv.url);
    const statuses = (await Promise.all(Array.from({ length: 6 }, () => postJson(`${srv.url}/v1/completions`, long)))).map((r) => r.status);
    // One runs, one waits (-concurrency 1 -queue 1); the other four are refused.
    expect(statuses.sort()).toEqual([200, 200, 429, 429, 429, 429]);
    expect((await stats(srv.url)).rejected - before.rejected).toBe(4);
  });

  it('a named-session request cancelled while queued leaves its context free', async () => {
    const long = { prompt: 'Once upon a time', max_tokens: 800, temperature: 0, ignore_eos: true };
    const first = await postJson(`${srv.url}/v1/completions`, { prompt: 'The little dog', max_tokens: 4, temperature: 0, svc_session: 'dog' });
    expect(first.status).toBe(200);
    // The next turn starts with what the session holds.
    const next = `The little dog${(first.json as { choices: { text: string }[] }).choices[0].text}, and`;
    const running = postJson(`${srv.url}/v1/completions`, long);
    await until(async () => (await stats(srv.url)).active === 1);
    const ac = new AbortController();
    const queued = fetch(`${srv.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: next, max_tokens: 4, temperature: 0, svc_session: 'dog', stream: true }),
      signal: ac.signal,
    }).catch(() => undefined);
    await until(async () => (await stats(srv.url)).queued === 1);
    ac.abort();
    await queued;
    await until(async () => (await stats(srv.url)).queued === 0);
    expect((await running).status).toBe(200);
    // The session's context was released: not 409 "in use by another request".
    const again = await postJson(`${srv.url}/v1/completions`, { prompt: next, max_tokens: 4, temperature: 0, svc_session: 'dog' });
    expect(again.status).toBe(200);
  });
});

/** The rest of a stream, as text. */
async function readRest(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  let text = '';
  const dec = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text;
    text += dec.decode(value);
  }
}

describe('graceful shutdown', () => {
  it('finishes a running stream on SIGTERM, refuses new work, and exits 0', async () => {
    const srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
    const res = await fetch(`${srv.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 600, temperature: 0, ignore_eos: true, stream: true }),
    });
    const reader = res.body!.getReader();
    await reader.read();
    const exit = srv.stop('SIGTERM');
    const text = await readRest(reader);
    expect(text.trim().endsWith('data: [DONE]')).toBe(true);
    expect(await exit).toBe(0);
  });

  it('a SIGTERM while the server boots ends it with 0 once it is up (it was killed, 143); piped logs have no colour codes', async () => {
    const proc = spawn(process.execPath, [join(ROOT, 'bin', 'svc.js'), '-addr', '127.0.0.1:0', '-m', fixtureModel(STORIES), '-threads', '1'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const exit = new Promise<[number | null, string | null]>((resolve) => proc.on('exit', (code, signal) => resolve([code, signal])));
    // Nest's first line: the server is booting, not yet listening.
    await new Promise<void>((resolve) => {
      const seen = (d: Buffer) => {
        out += d;
        if (out.includes('[Nest]')) resolve();
      };
      proc.stdout!.on('data', seen);
      proc.stderr!.on('data', seen);
    });
    proc.kill('SIGTERM');
    expect(await exit).toEqual([0, null]);
    expect(out).toContain('SIGTERM: finishing running requests');
    expect(out).not.toContain('\x1b[');
  });

  it('a signal while the code still loads (before any log line) waits for the boot, then stops with 0; the log names the port bound', async () => {
    const proc = spawn(process.execPath, [join(ROOT, 'bin', 'svc.js'), '-addr', '127.0.0.1:0', '-m', fixtureModel(STORIES), '-threads', '1'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout!.on('data', (d) => (out += d));
    proc.stderr!.on('data', (d) => (out += d));
    const exit = new Promise<[number | null, string | null]>((resolve) => proc.on('exit', (code, signal) => resolve([code, signal])));
    // Past node's own start (bin/svc.js is running), before the server's code has loaded (~0.7 s).
    await new Promise((r) => setTimeout(r, 300));
    proc.kill('SIGTERM');
    // It was killed (143) when the signal came in the first ~0.7 s.
    expect(await exit).toEqual([0, null]);
    expect(out).toMatch(/listening on http:\/\/127\.0\.0\.1:[1-9]\d*/);
  });

  it('a second signal ends the server at once, running requests or not (Ctrl-C twice, as llama-server takes it)', async () => {
    // A request of several seconds: the first signal waits for it.
    const srv = await startServer(['-m', syntheticModel('qwen2.5-tiny'), '-threads', '1']);
    const res = await fetch(`${srv.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 4000, temperature: 1, seed: 1, ignore_eos: true, stream: true }),
    });
    const reader = res.body!.getReader();
    await reader.read();
    srv.proc.kill('SIGINT');
    await until(async () => srv.logs().includes('SIGINT: finishing running requests'));
    const started = Date.now();
    // Exit status 1, not a SIGSEGV: exit handlers freed the engine under the running decode.
    expect([await srv.stop('SIGINT'), srv.proc.signalCode]).toEqual([1, null]);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(srv.logs()).toContain('SIGINT again: exiting now');
    await reader.cancel().catch(() => undefined);
  });

  it('a keep-alive client whose request finishes during the shutdown does not hold the exit', async () => {
    const srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
    const agent = new Agent({ keepAlive: true, keepAliveMsecs: 60_000 });
    const body = JSON.stringify({ prompt: 'Once upon a time', max_tokens: 400, temperature: 0, ignore_eos: true });
    const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(`${srv.url}/v1/completions`, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.on('error', reject);
      req.end(body);
    });
    await new Promise((r) => setTimeout(r, 30));
    const t0 = Date.now();
    // stop() kills the server after 15 s; before, the idle connection held it for 60 s and it exited 1.
    const exit = srv.stop('SIGTERM');
    const a = await answer;
    expect(a.status).toBe(200);
    expect(JSON.parse(a.text).usage.completion_tokens).toBe(400);
    expect(await exit).toBe(0);
    expect(Date.now() - t0).toBeLessThan(10_000);
    agent.destroy();
  });

  it('clients that stalled mid-request (half a body, half the headers) do not hold the exit', async () => {
    const srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
    const res = await fetch(`${srv.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 300, temperature: 0, ignore_eos: true, stream: true }),
    });
    const reader = res.body!.getReader();
    await reader.read();
    const { port } = new URL(srv.url);
    const stalled = await Promise.all([
      'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"pro',
      'POST /v1/completions HTTP/1.1\r\nHost: x\r\n',
    ].map((bytes) => new Promise<Socket>((resolve) => {
      const s = connect(Number(port), '127.0.0.1', () => s.write(bytes, () => resolve(s)));
      s.on('error', () => undefined);
    })));
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    // Before, the half-sent requests held the close until the forced exit: 60 s, status 1.
    const exit = srv.stop('SIGTERM');
    const text = await readRest(reader);
    expect(text.trim().endsWith('data: [DONE]')).toBe(true);
    expect(await exit).toBe(0);
    expect(Date.now() - t0).toBeLessThan(10_000);
    for (const s of stalled) s.destroy();
  });
});
