import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { get as httpsGet } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './fixtures';

export interface RunningServer {
  url: string;
  port: number;
  proc: ChildProcess;
  logs(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** A callers file naming alice and bob (keys `alice-key`, `bob-key`); returns its path. */
export function aliceAndBobCallers(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'svc-callers-')), 'callers.json');
  writeFileSync(file, JSON.stringify({ callers: [{ name: 'alice', keys: ['alice-key'] }, { name: 'bob', keys: ['bob-key'] }] }));
  return file;
}

/**
 * A free loopback port: any (port 0), or the first free one of SVC_TEST_PORTS ("18200-18219")
 * where test runs share a machine and each keeps to its own range.
 */
export async function freePort(): Promise<number> {
  const range = /^(\d+)-(\d+)$/.exec(process.env.SVC_TEST_PORTS ?? '');
  if (!range) return tryPort(0);
  for (let p = Number(range[1]); p <= Number(range[2]); p++) {
    const got = await tryPort(p).catch(() => undefined);
    if (got !== undefined) return got;
  }
  throw new Error(`no free port in SVC_TEST_PORTS ${process.env.SVC_TEST_PORTS}`);
}

function tryPort(want: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(want, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/**
 * Starts the real server process (bin/svc.js, or `entry`) on a free loopback port and waits
 * until /healthz answers 200 (or `waitStatus` says otherwise).
 */
export async function startServer(
  args: string[],
  opts: { env?: Record<string, string>; waitStatus?: number[]; timeoutMs?: number; tls?: TlsClientOptions; entry?: string } = {},
): Promise<RunningServer> {
  const port = await freePort();
  const store = mkdtempSync(join(tmpdir(), 'svc-store-'));
  let out = '';
  const proc = spawn(process.execPath, [join(ROOT, opts.entry ?? join('bin', 'svc.js')), '-addr', `127.0.0.1:${port}`, '-store', store, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout?.on('data', (d) => (out += d));
  proc.stderr?.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  const url = `${opts.tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  const want = opts.waitStatus ?? [200];
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`server exited with ${proc.exitCode}:\n${out}`);
    try {
      const status = opts.tls ? await httpsStatus(`${url}/healthz`, opts.tls) : (await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(5000) })).status;
      if (want.includes(status)) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`server did not become healthy:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    port,
    proc,
    logs: () => out,
    stop: async (signal: NodeJS.Signals = 'SIGTERM') => {
      if (proc.exitCode === null) proc.kill(signal);
      const t = setTimeout(() => proc.kill('SIGKILL'), 15_000);
      const code = await exited;
      clearTimeout(t);
      return code;
    },
  };
}

/** For an HTTPS server (-tls-cert): the CA to trust and, under -tls-client-ca, the client certificate. */
export interface TlsClientOptions {
  ca: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
}

function httpsStatus(url: string, tls: TlsClientOptions): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpsGet(url, { ...tls, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
  });
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; text: string; json: any }> {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await r.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, headers: r.headers, text, json };
}

/** Some SDKs' types no longer list temperature; the server still reads it: requests through this fetch are greedy. */
export const greedyFetch: typeof fetch = (url, init) => {
  if (init?.method === 'POST' && typeof init.body === 'string') {
    const body = JSON.parse(init.body);
    init = { ...init, body: JSON.stringify({ temperature: 0, ...body }) };
  }
  return fetch(url, init);
};
