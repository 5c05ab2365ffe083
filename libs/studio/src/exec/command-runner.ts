import { BeforeApplicationShutdown, Injectable, Logger } from '@nestjs/common';
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { ExecRequest } from './exec-request';

/** The answer of POST /studio/exec. */
export interface ExecResult {
  /** The shell's exit status; null when a signal ended it. */
  exit_code: number | null;
  /** The signal that ended the shell (SIGKILL after a timeout), else null. */
  signal: string | null;
  stdout: string;
  stderr: string;
  duration_ms: number;
  /** True when stdout or stderr went past the cap and lost its end. */
  truncated: boolean;
  timed_out: boolean;
}

/** Each of stdout and stderr keeps at most this much; the rest is read and dropped. */
export const OUTPUT_CAP_BYTES = 1024 * 1024;
/**
 * After the shell exits and its process group is killed, how long its pipes may stay open: a
 * process that left the group (setsid, a daemon) can hold them forever, and the answer must not
 * wait for it.
 */
const PIPE_GRACE_MS = 200;
/** svc's own secrets, which a command has no business reading from its environment. */
const SECRET_ENV = ['SVC_API_KEY', 'SVC_CONTEXT_KEY'];

export interface RunOptions {
  /** Fires when the client went away: the command is killed. */
  signal?: AbortSignal;
  capBytes?: number;
  env?: NodeJS.ProcessEnv;
}

/**
 * Runs `/bin/sh -c command` in its own process group (detached: a new session), stdin from
 * /dev/null. The whole group is sent SIGKILL when the timeout passes, when the client goes away,
 * and when the shell exits (so `cmd &` leaves nothing running behind the answer).
 */
export function runCommand(req: ExecRequest, opts: RunOptions = {}): Promise<ExecResult> {
  const cap = opts.capBytes ?? OUTPUT_CAP_BYTES;
  const started = performance.now();
  return new Promise<ExecResult>((resolve, reject) => {
    const child = spawn('/bin/sh', ['-c', req.command], { cwd: req.cwd, env: opts.env ?? commandEnv(), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const out = new Capture(cap, child.stdout);
    const err = new Capture(cap, child.stderr);
    let timedOut = false;
    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // ESRCH: the group is already empty
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, req.timeoutMs);
    opts.signal?.addEventListener('abort', killGroup, { once: true });
    if (opts.signal?.aborted) killGroup(); // an aborted signal fires no listener
    const finish = () => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', killGroup);
    };
    // spawn's own failures (an unreadable cwd, no /bin/sh) come here and never as 'exit'.
    child.once('error', (e) => {
      finish();
      killGroup();
      reject(e);
    });
    child.once('exit', (code, signal) => {
      finish();
      killGroup();
      void Promise.all([out.closed(PIPE_GRACE_MS), err.closed(PIPE_GRACE_MS)]).then(() =>
        resolve({
          exit_code: code,
          signal,
          stdout: out.text(),
          stderr: err.text(),
          duration_ms: Math.round(performance.now() - started),
          truncated: out.truncated || err.truncated,
          timed_out: timedOut,
        }),
      );
    });
  });
}

/** The server's environment less svc's secrets. */
export function commandEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const copy = { ...env };
  for (const k of SECRET_ENV) delete copy[k];
  return copy;
}

/** One output stream, kept up to the cap and drained past it (a writer blocked on a full pipe would hang until the timeout). */
class Capture {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  truncated = false;
  private readonly ended: Promise<void>;

  constructor(
    private readonly cap: number,
    private readonly stream: Readable,
  ) {
    stream.on('data', (b: Buffer) => this.add(b));
    this.ended = new Promise((done) => {
      stream.once('close', done);
      stream.once('error', () => done());
    });
  }

  private add(b: Buffer): void {
    const room = this.cap - this.size;
    if (b.length > room) this.truncated = true;
    if (room <= 0) return;
    const kept = b.length > room ? b.subarray(0, room) : b;
    this.chunks.push(kept);
    this.size += kept.length;
  }

  /** Resolves once the pipe closed, or after `graceMs` with the pipe destroyed. */
  async closed(graceMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((done) => (timer = setTimeout(done, graceMs)));
    await Promise.race([this.ended, late]);
    clearTimeout(timer);
    if (!this.stream.destroyed) this.stream.destroy();
  }

  /** The kept bytes as UTF-8; a character cut in two by the cap is dropped rather than shown as U+FFFD. */
  text(): string {
    const decoder = new StringDecoder('utf8');
    const text = decoder.write(Buffer.concat(this.chunks));
    return this.truncated ? text : text + decoder.end();
  }
}

/** POST /studio/exec's runner, with one log line per command (this is remote command execution: an audit trail). */
@Injectable()
export class CommandRunner implements BeforeApplicationShutdown {
  private readonly log = new Logger('studio');
  /** One per running command: a stopping server kills them (detached, they outlived it, and its stop waited them out). */
  private readonly running = new Set<AbortController>();

  async run(req: ExecRequest, signal?: AbortSignal): Promise<ExecResult> {
    this.log.log(`exec in ${req.cwd}: ${abbreviated(req.command)}`);
    const ac = new AbortController();
    const follow = () => ac.abort();
    signal?.addEventListener('abort', follow, { once: true });
    if (signal?.aborted) ac.abort();
    this.running.add(ac);
    try {
      const r = await runCommand(req, { signal: ac.signal });
      this.log.log(`exec done: ${r.signal ?? `exit ${r.exit_code}`}${r.timed_out ? ' (timed out)' : ''} in ${r.duration_ms} ms`);
      return r;
    } finally {
      this.running.delete(ac);
      signal?.removeEventListener('abort', follow);
    }
  }

  beforeApplicationShutdown(): void {
    if (this.running.size > 0) this.log.log(`stopping: killing ${this.running.size} running command(s)`);
    for (const ac of this.running) ac.abort();
  }
}

function abbreviated(command: string): string {
  const line = command.replace(/\s+/g, ' ');
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}
