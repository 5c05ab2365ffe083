// Shared by the container tests: where things are, the engine (podman's API socket as
// scripts/podman-setup.sh starts it) and the podman / podman-compose command lines.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import OpenAI from 'openai';
import { getContainerRuntimeClient, ImagePullPolicy, StartedTestContainer } from 'testcontainers';

export const ROOT = resolve(__dirname, '..', '..');
export const MODELS_DIR = process.env.SVC_MODELS_DIR ?? resolve(ROOT, '..', 'shared', 'models');
export const MODEL_FILE = 'stories260K.gguf';
export const PORT = 11435;
export const SKIP = process.env.SVC_SKIP_CONTAINERS === '1';
const PODMAN_SOCK = '/run/podman/podman.sock';

// Nothing can be pulled in this environment, and the images the Dockerfiles start FROM
// are made locally (scripts/podman-setup.sh): never pull.
export const neverPull: ImagePullPolicy = { shouldPull: () => false };

/** Use podman's socket when no engine is configured, the way scripts/podman-setup.sh sets it up. */
export function defaultToPodman(): void {
  if (!process.env.DOCKER_HOST && existsSync(PODMAN_SOCK)) {
    process.env.DOCKER_HOST = `unix://${PODMAN_SOCK}`;
    process.env.TESTCONTAINERS_RYUK_DISABLED ??= 'true';
    process.env.TESTCONTAINERS_HOST_OVERRIDE ??= '127.0.0.1';
  }
}

export async function engine() {
  try {
    return await getContainerRuntimeClient();
  } catch (err) {
    throw new Error(
      `container tests need a Docker-compatible engine and found none (${(err as Error).message}). ` +
        'Start podman\'s API with: eval "$(bash scripts/podman-setup.sh up)" ' +
        '(or point DOCKER_HOST at an engine); set SVC_SKIP_CONTAINERS=1 to skip these tests on purpose.',
    );
  }
}

export function requireModel(): void {
  if (!existsSync(join(MODELS_DIR, MODEL_FILE))) throw new Error(`${join(MODELS_DIR, MODEL_FILE)} is missing (set SVC_MODELS_DIR)`);
}

export interface Health {
  status: string;
  model: string;
  backend: string;
  instance: string;
}

// Talking to a server in a testcontainers container.
export async function health(c: StartedTestContainer): Promise<{ code: number; body: Health }> {
  const r = await fetch(`${baseUrl(c)}/healthz`);
  return { code: r.status, body: (await r.json()) as Health };
}

export function baseUrl(c: StartedTestContainer): string {
  return `http://${c.getHost()}:${c.getMappedPort(PORT)}`;
}

export function openai(c: StartedTestContainer): OpenAI {
  return new OpenAI({ baseURL: `${baseUrl(c)}/v1`, apiKey: 'no-key-needed', maxRetries: 0, timeout: 60_000 });
}

export async function modelIds(c: StartedTestContainer): Promise<string[]> {
  const list = await openai(c).models.list();
  return list.data.map((m) => m.id);
}

export async function execOk(c: StartedTestContainer, cmd: string[]): Promise<string> {
  const r = await c.exec(cmd);
  if (r.exitCode !== 0) throw new Error(`${cmd.join(' ')} exited ${r.exitCode}: ${r.output}`);
  return r.output.trim();
}

/** Every process in the container (PID 1 and the server at least) runs as uid/gid 10001. */
export async function expectAllProcessesAs10001(c: StartedTestContainer): Promise<void> {
  const uids = (await execOk(c, ['sh', '-c', 'grep -h "^Uid:" /proc/[0-9]*/status'])).split('\n');
  expect(uids.length).toBeGreaterThanOrEqual(2);
  for (const line of uids) expect(line.split(/\s+/).slice(1)).toEqual(['10001', '10001', '10001', '10001']);
}

export interface Ran {
  code: number;
  out: string;
}

/** Runs a command (no shell); resolves with its exit code and stdout+stderr, never rejects. */
export function sh(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<Ran> {
  return new Promise((done) => {
    execFile(cmd, args, { cwd: ROOT, env: opts.env ?? process.env, timeout: opts.timeoutMs ?? 120_000, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      // A numeric code is the exit status; otherwise it did not run or was killed (timeout).
      const status = (err as { code?: unknown } | null)?.code;
      const code = !err ? 0 : typeof status === 'number' ? status : 124;
      done({ code, out: `${stdout}${stderr}${err && typeof status !== 'number' ? `\n${err.message}` : ''}` });
    });
  });
}

export async function imageExists(image: string): Promise<boolean> {
  return (await sh('podman', ['image', 'exists', image])).code === 0;
}

/** A port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => done(port));
    });
  });
}

/** Polls `probe` until it returns a value (not undefined) or `ms` pass; then throws with the last state. */
export async function waitFor<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) throw new Error(`timed out after ${ms / 1000} s waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}
