import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { send } from './helpers/auth';
import { fixtureModel, STORIES } from './helpers/fixtures';
import { RunningServer, startServer } from './helpers/server';
import { bootStudio } from './helpers/studio-dom';
import { eventuallyGone, gone, pidFromFile } from './helpers/processes';

jest.setTimeout(120_000);

const EXEC_OFF = 'the server serves the studio without -studio-exec';
const MISDIRECTED = { error: { message: 'Studio answers this machine only', type: 'Misdirected Request' } };
const FOREIGN = 'origin not permitted; a web page at https://evil.example may not call this server';


const start = (args: string[], env?: Record<string, string>) => startServer(['-m', fixtureModel(STORIES), '-threads', '1', ...args], { env });

describe('studio without -studio', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await start([]);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('answers 404 as an unknown route, after the studio Host rule (421)', async () => {
    const page = await send(`${srv.url}/studio`);
    expect([page.status, page.json?.error?.type]).toEqual([404, 'Not Found']);
    expect((await send(`${srv.url}/studio/exec`, { method: 'POST', body: { command: 'echo hi' } })).status).toBe(404);
    expect((await send(`${srv.url}/studio/config`)).status).toBe(404);
    const rebound = await send(`${srv.url}/studio`, { headers: { host: `rebound.example:${srv.port}` } });
    expect([rebound.status, rebound.json]).toEqual([421, MISDIRECTED]);
  });
});

describe('studio with -studio, without -studio-exec', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await start(['-studio']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('serves one self-contained page under a strict policy, to this machine only', async () => {
    const page = await send(`${srv.url}/studio`);
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toMatch(/^default-src 'none'; script-src 'sha256-[A-Za-z0-9+/=]+'; style-src 'sha256-[A-Za-z0-9+/=]+'; connect-src 'self';/);
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(page.headers['x-frame-options']).toBe('DENY');
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.text).toMatch(/^<!doctype html>/);
    // Nothing from another host: no absolute URL at all, scripts and styles inline only.
    expect(page.text).not.toMatch(/https?:\/\//i);
    expect(page.text).not.toMatch(/<script[^>]*\ssrc=|<link[^>]*stylesheet|@import/i);
    for (const host of ['localhost', '127.0.0.1', 'studio.localhost', '[::1]']) {
      expect((await send(`${srv.url}/studio`, { headers: { host: `${host}:${srv.port}` } })).status).toBe(200);
    }
    for (const host of [`rebound.example:${srv.port}`, `192.168.1.5:${srv.port}`, 'localhost.evil.example']) {
      const r = await send(`${srv.url}/studio`, { headers: { host } });
      expect([host, r.status, r.json]).toEqual([host, 421, MISDIRECTED]);
    }
    const foreign = await send(`${srv.url}/studio`, { headers: { origin: 'https://evil.example' } });
    expect([foreign.status, foreign.json.error.message]).toEqual([403, FOREIGN]);
    // The page's own origin passes; one on another port of this machine is another page.
    expect((await send(`${srv.url}/studio`, { headers: { origin: `http://localhost:${srv.port}`, host: `localhost:${srv.port}` } })).status).toBe(200);
    expect((await send(`${srv.url}/studio`, { headers: { origin: `http://localhost:${srv.port + 1}` } })).status).toBe(403);
  });

  it('refuses command execution with the spec message, whatever the JSON body, and tells the page', async () => {
    expect((await send(`${srv.url}/studio/config`)).json).toEqual({ exec: false });
    for (const body of [{ command: 'echo hi' }, {}, { command: 5 }, '[]']) {
      const r = await send(`${srv.url}/studio/exec`, { method: 'POST', body });
      expect([r.status, r.json]).toEqual([403, { error: { message: EXEC_OFF, type: 'Forbidden' } }]);
    }
    // The service's JSON parser reads every body before any route: malformed JSON is its 400.
    expect((await send(`${srv.url}/studio/exec`, { method: 'POST', body: 'not json' })).status).toBe(400);
  });

  it("runs its own script: connected, no terminal, a streamed chat shown with the server's timings", async () => {
    const page = await send(`${srv.url}/studio`);
    const b = bootStudio(page.text, srv.url, srv.url);
    await b.until(() => b.el('status').textContent.startsWith('connected'));
    expect(b.el('status').textContent).toBe('connected · 1 model');
    expect(b.el('term-tab').hidden).toBe(true);
    expect(b.el('chat-model').children.map((o) => o.value)).toEqual(['', 'stories260K']);
    b.el('temperature').value = '0';
    b.el('max-tokens').value = '12';
    b.el('prompt').value = 'Once upon a time';
    await b.el('send').click();
    expect(b.el('chat-error').textContent).toBe('');
    const [user, assistant] = b.el('transcript').children;
    expect(user.textContent).toBe('userOnce upon a time');
    expect(assistant.find('body')[0].textContent.length).toBeGreaterThan(0);
    expect(b.el('chat-meta').textContent).toMatch(/^\d+ prompt \+ 12 completion tokens · prefill [\d.]+ ms · decode [\d.]+ ms .* · finish: length$/);
    expect(b.requests.find((r) => r.path === '/v1/chat/completions')?.method).toBe('POST');
  });
});

describe('studio with -studio-exec and an API key (from $SVC_API_KEY)', () => {
  let srv: RunningServer;
  const KEY = { authorization: 'Bearer k' };
  const exec = (body: unknown, headers: Record<string, string> = KEY) => send(`${srv.url}/studio/exec`, { method: 'POST', body, headers });
  beforeAll(async () => {
    srv = await start(['-studio', '-studio-exec'], { SVC_API_KEY: 'k' });
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('serves the page and everything else with the key only', async () => {
    expect((await send(`${srv.url}/studio`)).status).toBe(401);
    expect((await send(`${srv.url}/studio`, { headers: KEY })).status).toBe(200);
    expect((await send(`${srv.url}/studio/config`)).status).toBe(401);
    expect((await send(`${srv.url}/studio/config`, { headers: KEY })).json).toEqual({ exec: true });
    const noKey = await exec({ command: 'echo hi' }, {});
    expect([noKey.status, noKey.headers['www-authenticate']]).toEqual([401, 'Bearer realm=svc']);
    expect((await exec({ command: 'echo hi' }, { authorization: 'Bearer wrong' })).status).toBe(401);
  });

  it("runs a command on this machine: output, exit status, stderr, the server's folder or cwd, no secrets in its environment", async () => {
    const r = await exec({ command: 'echo hello; echo oops >&2; exit 7' });
    expect(r.status).toBe(200);
    expect(r.headers['cache-control']).toBe('no-store');
    expect(r.json).toMatchObject({ exit_code: 7, signal: null, stdout: 'hello\n', stderr: 'oops\n', truncated: false, timed_out: false });
    expect(typeof r.json.duration_ms).toBe('number');
    // Each command leaves an audit line in the server's log.
    expect(srv.logs()).toMatch(/\[studio\] exec in \S+: echo hello; echo oops >&2; exit 7/);
    const dir = mkdtempSync(join(tmpdir(), 'studio-cwd-'));
    expect((await exec({ command: 'pwd', cwd: dir })).json.stdout).toBe(`${dir}\n`);
    expect((await exec({ command: 'echo "[$SVC_API_KEY]"' })).json.stdout).toBe('[]\n');
    // Unknown fields are ignored (spec rule 4); any JSON media type parameters are fine.
    expect((await exec({ command: 'true', extra: 1 })).json.exit_code).toBe(0);
  });

  it('kills a command at its timeout with everything it started, and caps its output', async () => {
    const t0 = Date.now();
    const slow = await exec({ command: 'sleep 10 & echo $!; wait', timeout_ms: 300 });
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(slow.json).toMatchObject({ exit_code: null, signal: 'SIGKILL', timed_out: true });
    expect(await eventuallyGone(Number(slow.json.stdout.trim()))).toBe(true);
    const big = await exec({ command: "head -c 1100000 /dev/zero | tr '\\0' a; echo end" });
    expect(big.json.stdout.length).toBe(1024 * 1024);
    expect(big.json).toMatchObject({ truncated: true, exit_code: 0, stderr: '' });
  });

  it('kills the command when the client goes away', async () => {
    const pidFile = join(mkdtempSync(join(tmpdir(), 'studio-pid-')), 'pid');
    const ac = new AbortController();
    const running = fetch(`${srv.url}/studio/exec`, { method: 'POST', headers: { ...KEY, 'content-type': 'application/json' }, body: JSON.stringify({ command: `echo $$ > ${pidFile}; exec sleep 20` }), signal: ac.signal });
    const pid = await pidFromFile(pidFile);
    expect(pid).toBeGreaterThan(0);
    expect(gone(pid)).toBe(false);
    ac.abort();
    await expect(running).rejects.toThrow();
    expect(await eventuallyGone(pid)).toBe(true);
  });

  it('answers 400 for bad bodies and 415 for a body not declared as JSON', async () => {
    const cases: Array<[unknown, string]> = [
      [{}, 'command is required'],
      [[{ command: 'ls' }], 'cannot parse request: the body must be a JSON object'],
      [{ command: 3 }, 'command must be a string'],
      [{ command: '' }, 'command is empty'],
      [{ command: 'ls', timeout_ms: 0 }, 'timeout_ms must be between 1 and 300000, got 0'],
      [{ command: 'ls', timeout_ms: 'soon' }, 'timeout_ms must be an integer (milliseconds)'],
      [{ command: 'ls', cwd: '/no/such/dir' }, 'cwd "/no/such/dir" is not a directory on this machine'],
    ];
    for (const [body, message] of cases) {
      const r = await exec(body);
      expect([r.status, r.json]).toEqual([400, { error: { message, type: 'Bad Request' } }]);
    }
    const malformed = await exec('{"command": ');
    expect([malformed.status, malformed.json.error.message]).toEqual([400, expect.stringMatching(/^malformed JSON/)]);
    const text = await send(`${srv.url}/studio/exec`, { method: 'POST', headers: { ...KEY, 'content-type': 'text/plain' }, body: JSON.stringify({ command: 'echo hi' }) });
    expect([text.status, text.json.error.message]).toEqual([415, 'send the command as Content-Type: application/json']);
  });

  it('never runs a command for another page or a rebound host name, key or not', async () => {
    const marker = join(mkdtempSync(join(tmpdir(), 'studio-marker-')), 'ran');
    const body = { command: `touch ${marker}` };
    const foreign = await exec(body, { ...KEY, origin: 'https://evil.example' });
    expect([foreign.status, foreign.json.error.message]).toEqual([403, FOREIGN]);
    const sameMachineOtherPort = await exec(body, { ...KEY, origin: `http://localhost:${srv.port + 1}` });
    expect(sameMachineOtherPort.status).toBe(403);
    const nullOrigin = await exec(body, { ...KEY, origin: 'null' });
    expect(nullOrigin.status).toBe(403);
    const rebound = await exec(body, { ...KEY, host: `rebound.example:${srv.port}`, origin: `http://rebound.example:${srv.port}` });
    expect([rebound.status, rebound.json]).toEqual([421, MISDIRECTED]);
    expect((await exec(body, { ...KEY, host: `rebound.example:${srv.port}` })).status).toBe(421);
    // A request line naming a full URL reaches the same route: the same rule holds (it skipped the check).
    const absolute = await send(`${srv.url}/studio/exec`, { method: 'POST', body, headers: { ...KEY, host: `rebound.example:${srv.port}` }, target: `http://localhost:${srv.port}/studio/exec` });
    expect([absolute.status, absolute.json]).toEqual([421, MISDIRECTED]);
    const page = await send(`${srv.url}/studio`, { headers: { ...KEY, host: `rebound.example:${srv.port}` }, target: `HTTP://localhost/studio?x=1` });
    expect(page.status).toBe(421);
    // A CORS preflight from another page gets no permission.
    const pre = await send(`${srv.url}/studio/exec`, { method: 'OPTIONS', headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' } });
    expect([pre.status, pre.headers['access-control-allow-origin']]).toEqual([204, undefined]);
    expect(() => readFileSync(marker)).toThrow();
    // The page's own origin runs it.
    const own = await exec(body, { ...KEY, origin: `http://localhost:${srv.port}`, host: `localhost:${srv.port}` });
    expect(own.json.exit_code).toBe(0);
    expect(readFileSync(marker, 'utf8')).toBe('');
  });

  it('runs its own script: asks for the key, then chat, token count, redaction and the terminal work', async () => {
    const page = await send(`${srv.url}/studio`, { headers: KEY });
    const origin = `http://127.0.0.1:${srv.port}`;
    const b = bootStudio(page.text, srv.url, origin);
    await b.until(() => b.el('status').textContent === 'this server needs an API key');
    expect(b.el('keybox').open).toBe(true);
    b.el('key').value = 'k';
    await b.el('key-save').click();
    await b.until(() => b.el('status').textContent.startsWith('connected'));
    expect(b.el('status').textContent).toBe('connected · 1 model · command execution on');
    expect(b.storage.get('svc.key')).toBe('k');
    expect(b.el('term-tab').hidden).toBe(false);

    b.el('prompt').value = 'Once upon a time';
    b.el('max-tokens').value = '4';
    await b.el('send').click();
    expect(b.el('chat-error').textContent).toBe('');
    expect(b.el('chat-meta').textContent).toMatch(/\+ 4 completion tokens · prefill .* finish: length$/);

    b.el('tokens-input').value = 'Once upon a time';
    await b.el('tokens-run').click();
    expect(b.el('tokens-out').textContent).toMatch(/^\d+ input tokens on stories260K$/);
    // A failed run clears the panel's last result (it stayed under the error).
    b.el('chat-model').value = 'nosuch';
    await b.el('tokens-run').click();
    expect([b.el('tokens-error').textContent, b.el('tokens-out').textContent]).toEqual([expect.stringMatching(/^404: /), '']);
    b.el('chat-model').value = '';

    b.el('redact-input').value = 'mail jo@example.org now';
    await b.el('redact-run').click();
    expect(b.el('redact-out').textContent).toBe('mail [EMAIL] now');
    expect(b.el('redact-findings').textContent).toContain('jo@example.org');

    // No encoder on this server: the service's own 400 is shown.
    b.el('embed-input').value = 'a\nb';
    await b.el('embed-run').click();
    expect(b.el('embed-error').textContent).toMatch(/^400: /);

    b.el('term-cmd').value = 'echo from-the-page; echo warn >&2';
    await b.el('term-run').click();
    const lines = b.el('term-out').children.map((c) => [c.className, c.textContent]);
    expect(lines).toEqual([
      ['cmd', '$ echo from-the-page; echo warn >&2\n'],
      ['', 'from-the-page\n'],
      ['err', 'warn\n'],
      ['note', expect.stringMatching(/^\[exit 0 · \d+ ms\]\n$/)],
    ]);
    // Every request carried the key; the exec request was a same-origin POST with the JSON type.
    const after = b.requests.slice(b.requests.findIndex((r) => r.headers.authorization));
    expect(after.every((r) => r.headers.authorization === 'Bearer k')).toBe(true);
    expect(b.requests.find((r) => r.path === '/studio/exec')?.headers['content-type']).toBe('application/json');
  });
});

describe('a server stopping while a studio command runs', () => {
  it('kills the command and stops at once (the command outlived it, and the stop waited 60 s)', async () => {
    const srv = await start(['-studio', '-studio-exec'], { SVC_API_KEY: 'k' });
    const pidFile = join(mkdtempSync(join(tmpdir(), 'studio-pid-')), 'pid');
    const running = fetch(`${srv.url}/studio/exec`, { method: 'POST', headers: { authorization: 'Bearer k', 'content-type': 'application/json' }, body: JSON.stringify({ command: `echo $$ > ${pidFile}; exec sleep 120`, timeout_ms: 300_000 }) }).then(
      async (r) => (await r.json()) as { signal: string | null },
      () => undefined,
    );
    const pid = await pidFromFile(pidFile);
    expect(pid).toBeGreaterThan(0);
    const t0 = Date.now();
    expect(await srv.stop()).toBe(0);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(await eventuallyGone(pid)).toBe(true);
    expect(await running).toEqual(expect.objectContaining({ signal: 'SIGKILL' }));
    expect(srv.logs()).toMatch(/killing 1 running command/);
  });
});
