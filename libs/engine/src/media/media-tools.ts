import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { InvalidRequestError } from '../core/errors';

/**
 * Video and PDF parts are read by programs outside the server (ffmpeg, poppler's pdftotext and
 * pdftoppm): a decoder fed untrusted bytes runs in its own process, with a time limit and an
 * output cap, and a crash there is one request's 400, never the server's. The Docker images and
 * scripts/install-system-deps.sh install them; a machine without them answers such parts 400.
 */
export const MEDIA_TOOL_TIMEOUT_MS = 60_000;
/** What one request's media may take to read, all its runs together (16 pages of 60 s each were 16 minutes). */
export const MEDIA_BUDGET_MS = 120_000;

/** Which Debian package holds each tool (named in the 400 when one is missing). */
const PACKAGE: Record<string, string> = { ffmpeg: 'ffmpeg', ffprobe: 'ffmpeg', pdftotext: 'poppler-utils', pdftoppm: 'poppler-utils' };

export interface ToolRun {
  args: string[];
  /** Bytes written to the tool's standard input (then closed). */
  input?: Buffer;
  /** Standard output past this many bytes ends the run as a refusal. */
  maxOutput: number;
  /** What the request calls the part ("video 1"), for its error messages. */
  what: string;
  /** The request's signal, with its media budget (mediaSignal): either ends the run. */
  signal?: AbortSignal;
  timeoutMs?: number;
  /** Text never repeated in a message (a temporary file's path), and what is said instead. */
  hide?: [string, string];
}

/** The request's own signal joined with its media budget. */
export function mediaSignal(signal: AbortSignal | undefined): AbortSignal {
  const budget = AbortSignal.timeout(MEDIA_BUDGET_MS);
  return signal ? AbortSignal.any([signal, budget]) : budget;
}

function stopped(what: string, signal: AbortSignal): InvalidRequestError {
  const budget = (signal.reason as Error | undefined)?.name === 'TimeoutError';
  return new InvalidRequestError(budget ? `${what}: the request's media were not read within ${MEDIA_BUDGET_MS} ms` : `${what}: the request was cancelled`);
}

/**
 * Decoders running at once. ffmpeg decodes on every core: a burst of video requests would take
 * the CPU from the engine's threads, so the rest wait their turn (their time limit starts when they run).
 */
export const MAX_RUNNING_TOOLS = Math.max(1, Math.min(4, Math.floor(availableParallelism() / 2)));
let running = 0;
const waiting: Array<() => void> = [];

/** Runs `tool` in a turn of its own and returns its standard output; any failure is a 400 naming the part. */
export async function runMediaTool(tool: string, run: ToolRun): Promise<Buffer> {
  const release = await mediaTurn(run.what, run.signal);
  try {
    return await runTool(tool, run);
  } finally {
    release();
  }
}

/**
 * Waits for a free place among MAX_RUNNING_TOOLS and takes it until the returned function is
 * called; a request gone while waiting leaves the queue. A video holds one turn across its
 * temporary file and its runs, so waiting videos hold no disk.
 */
export function mediaTurn(what: string, signal: AbortSignal | undefined): Promise<() => void> {
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    running--;
    waiting.shift()?.();
  };
  if (signal?.aborted) return Promise.reject(stopped(what, signal));
  if (running < MAX_RUNNING_TOOLS) {
    running++;
    return Promise.resolve(release);
  }
  return new Promise((resolve, reject) => {
    const go = (): void => {
      signal?.removeEventListener('abort', gone);
      running++;
      resolve(release);
    };
    const gone = (): void => {
      const i = waiting.indexOf(go);
      if (i >= 0) waiting.splice(i, 1);
      reject(stopped(what, signal!));
    };
    signal?.addEventListener('abort', gone, { once: true });
    waiting.push(go);
  });
}

/** Runs `tool` now (the caller holds a turn): its standard output, or a 400 naming the part. */
export function runTool(tool: string, run: ToolRun): Promise<Buffer> {
  const timeoutMs = run.timeoutMs ?? MEDIA_TOOL_TIMEOUT_MS;
  const say = (text: string): string => (run.hide ? text.split(run.hide[0]).join(run.hide[1]) : text);
  return new Promise((resolve, reject) => {
    if (run.signal?.aborted) return reject(stopped(run.what, run.signal));
    const child = spawn(tool, run.args, { stdio: ['pipe', 'pipe', 'pipe'], env: process.env });
    const out: Buffer[] = [];
    let outBytes = 0;
    let err = '';
    let failure: Error | undefined;
    const stop = (e: Error): void => {
      failure ??= e;
      child.kill('SIGKILL');
      // A grandchild holding the pipes open would delay 'close' past the limit.
      child.stdout.destroy();
      child.stderr.destroy();
    };
    const timer = setTimeout(() => stop(new InvalidRequestError(`${run.what}: ${tool} did not finish within ${timeoutMs} ms`)), timeoutMs);
    const onAbort = (): void => stop(stopped(run.what, run.signal!));
    run.signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout.on('data', (c: Buffer) => {
      outBytes += c.length;
      if (outBytes > run.maxOutput) stop(new InvalidRequestError(`${run.what}: ${tool} wrote more than ${run.maxOutput} bytes`));
      else out.push(c);
    });
    // The last lines say why a decode failed; the rest is not kept.
    child.stderr.on('data', (c: Buffer) => (err = (err + c.toString('utf8')).slice(-2000)));
    // A tool that exits before reading all of its input closes the pipe under us: its exit code says why.
    child.stdin.on('error', () => undefined);
    child.on('error', (e: NodeJS.ErrnoException) => {
      failure ??= e.code === 'ENOENT' ? new InvalidRequestError(`${run.what} cannot be read here: ${tool} is not installed (Debian package ${PACKAGE[tool] ?? tool})`) : e;
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      run.signal?.removeEventListener('abort', onAbort);
      if (failure) return reject(failure instanceof InvalidRequestError ? failure : new InvalidRequestError(`${run.what}: ${tool} failed (${failure.message})`));
      if (code !== 0) return reject(new InvalidRequestError(`${run.what} cannot be decoded: ${say(lastLine(err)) || `${tool} exited with ${code}`}`));
      resolve(Buffer.concat(out));
    });
    child.stdin.end(run.input);
  });
}

function lastLine(s: string): string {
  const lines = s.split('\n').map((l) => l.trim()).filter(Boolean);
  return lines[lines.length - 1] ?? '';
}
