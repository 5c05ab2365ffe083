import { HttpException } from '@nestjs/common';
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { InvalidRequestError } from '../../../engine/src/core/errors';

/** POST /studio/exec as the runner takes it: checked, defaults filled in, cwd absolute. */
export interface ExecRequest {
  command: string;
  cwd: string;
  timeoutMs: number;
}

export const DEFAULT_TIMEOUT_MS = 30_000;
export const MAX_TIMEOUT_MS = 300_000;
/**
 * Linux takes one argument of at most 128 KiB (MAX_ARG_STRLEN); 32 Ki characters fit in it
 * whatever their UTF-8 length, so a long command is a 400 here rather than spawn's E2BIG (a 500).
 */
export const MAX_COMMAND_CHARS = 32 * 1024;

/**
 * Reads the body of POST /studio/exec, `{command, cwd?, timeout_ms?}` (other fields are ignored,
 * spec rule 4); a 400 (InvalidRequestError) names what is wrong. The controller takes the body
 * unchecked, so that without -studio-exec any body answers the 403 first. `baseDir` is what a
 * relative or absent cwd is taken from (the server's working directory).
 */
export function execRequest(body: unknown, baseDir: string): ExecRequest {
  if (body !== undefined && (typeof body !== 'object' || body === null || Array.isArray(body))) {
    throw new InvalidRequestError('cannot parse request: the body must be a JSON object');
  }
  const { command, cwd, timeout_ms: timeout } = (body ?? {}) as Record<string, unknown>;
  if (command === undefined || command === null) throw new InvalidRequestError('command is required');
  if (typeof command !== 'string') throw new InvalidRequestError('command must be a string');
  if (command.trim() === '') throw new InvalidRequestError('command is empty');
  if (command.length > MAX_COMMAND_CHARS) throw new InvalidRequestError(`command is ${command.length} characters; at most ${MAX_COMMAND_CHARS}`);
  // A NUL cannot pass through exec(2): spawn would throw, a 500 instead of the caller's mistake.
  if (command.includes('\0')) throw new InvalidRequestError('command holds a NUL character');
  return { command, cwd: workingDirectory(cwd, baseDir), timeoutMs: timeoutOf(timeout) };
}

function workingDirectory(cwd: unknown, baseDir: string): string {
  if (cwd === undefined || cwd === null || cwd === '') return baseDir;
  if (typeof cwd !== 'string') throw new InvalidRequestError('cwd must be a string');
  if (cwd.includes('\0')) throw new InvalidRequestError('cwd holds a NUL character');
  const dir = resolve(baseDir, cwd);
  // Checked here so a missing folder is the caller's 400, not spawn's ENOENT (which reads as
  // "/bin/sh not found").
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    // missing or unreadable: said below
  }
  if (!isDir) throw new InvalidRequestError(`cwd ${JSON.stringify(dir)} is not a directory on this machine`);
  return dir;
}

function timeoutOf(v: unknown): number {
  if (v === undefined || v === null) return DEFAULT_TIMEOUT_MS;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new InvalidRequestError('timeout_ms must be an integer (milliseconds)');
  if (v < 1 || v > MAX_TIMEOUT_MS) throw new InvalidRequestError(`timeout_ms must be between 1 and ${MAX_TIMEOUT_MS}, got ${v}`);
  return v;
}

/**
 * Only a JSON body runs a command. The service parses JSON whatever the declared type (as
 * Ollama does), but a web page can send a form or text/plain to any address without asking;
 * application/json from another page needs a CORS preflight, which the studio refuses to every
 * origin but the server's own. So even a browser that sent no Origin cannot start a command.
 */
function isJsonContentType(contentType: string | undefined): boolean {
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
  return type === 'application/json';
}

/** The spec's 403 for a studio served without -studio-exec. */
export const EXEC_OFF_MESSAGE = 'the server serves the studio without -studio-exec';

/** Whether this request may run a command at all: 403 without -studio-exec (checked before the body), 415 for a body not declared as JSON. */
export function checkExecAllowed(execEnabled: boolean, contentType: string | undefined): void {
  if (!execEnabled) throw new HttpException(EXEC_OFF_MESSAGE, 403);
  if (!isJsonContentType(contentType)) throw new HttpException('send the command as Content-Type: application/json', 415);
}
