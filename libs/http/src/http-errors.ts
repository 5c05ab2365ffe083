import { HttpException } from '@nestjs/common';
import { STATUS_CODES } from 'node:http';
import { EngineError } from '../../engine/src/core/errors';

export interface HttpFailure {
  status: number;
  message: string;
  headers?: Record<string, string>;
}

/** The one place where an exception becomes an HTTP status and message. */
export function toHttpFailure(err: unknown): HttpFailure {
  if (err instanceof EngineError) {
    const f: HttpFailure = { status: err.status, message: err.message };
    if (err.status === 429 || err.retryAfter !== undefined) f.headers = { 'retry-after': String(err.retryAfter ?? 1) };
    return f;
  }
  if (err instanceof HttpException) {
    const body = err.getResponse();
    const message =
      typeof body === 'string'
        ? body
        : Array.isArray((body as { message?: unknown }).message)
          ? ((body as { message: string[] }).message).join('; ')
          : String((body as { message?: unknown }).message ?? err.message);
    return { status: err.getStatus(), message };
  }
  const fe = err as { statusCode?: number; code?: string; message?: string };
  if (typeof fe?.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 600) {
    return { status: fe.statusCode, message: fe.message ?? STATUS_CODES[fe.statusCode] ?? 'error' };
  }
  return { status: 500, message: (err as Error)?.message ?? String(err) };
}

export function statusText(status: number): string {
  return STATUS_CODES[status] ?? 'Error';
}

/**
 * The error body of a route: the local-runner dialect uses a plain string, and so does the
 * decision route (the spec: its error bodies are the local-runner's own dialect).
 */
export function errorBody(path: string, status: number, message: string): unknown {
  if (isLocalRunnerPath(path) || path === '/v1/systemone') return { error: message };
  return { error: { message, type: statusText(status) } };
}

export function isLocalRunnerPath(path: string): boolean {
  return path === '/api' || path.startsWith('/api/');
}
