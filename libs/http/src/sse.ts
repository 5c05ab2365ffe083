import { FastifyReply } from 'fastify';

/**
 * Server-sent events (and NDJSON) on the raw socket. The reply is hijacked so
 * frames go out as soon as they are written. The 200 and its headers go out with
 * the first frame: a request that fails before it has produced anything (a
 * constraint that allows no first token, a queue timeout) still gets its error
 * status and body (HttpErrorFilter), not a connection closed without an answer.
 */
export class StreamWriter {
  private readonly raw: FastifyReply['raw'];
  private readonly headers: Record<string, string>;

  constructor(reply: FastifyReply, contentType: 'text/event-stream' | 'application/x-ndjson', headers: Record<string, string> = {}) {
    reply.hijack();
    this.raw = reply.raw;
    this.headers = {
      ...replyHeaders(reply),
      'content-type': contentType === 'text/event-stream' ? 'text/event-stream; charset=utf-8' : 'application/x-ndjson',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      ...headers,
    };
  }

  get closed(): boolean {
    return this.raw.destroyed || this.raw.writableEnded;
  }

  /** `data: <json>` frame, optionally with an `event:` line. */
  event(data: unknown, event?: string): void {
    this.write((event ? `event: ${event}\n` : '') + `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
  }

  line(obj: unknown): void {
    this.write(JSON.stringify(obj) + '\n');
  }

  /**
   * The 200 and its headers now, before any frame: a stream whose first text is held back (the
   * start of a stop string, a call's syntax) said nothing at all until its end.
   */
  open(): void {
    if (this.closed || this.raw.headersSent) return;
    this.begin();
    this.raw.flushHeaders();
  }

  end(): void {
    if (this.closed) return;
    this.begin();
    this.raw.end();
  }

  private write(chunk: string): void {
    if (this.closed) return;
    this.begin();
    this.raw.write(chunk);
  }

  private begin(): void {
    if (this.raw.headersSent) return;
    this.raw.writeHead(200, this.headers);
    this.raw.socket?.setNoDelay(true);
  }
}

/**
 * The answer to a failure on a hijacked reply: its error status and body while
 * nothing of the stream went out, else the connection is cut (no terminating
 * frame), which clients treat as truncated.
 */
export function failHijacked(reply: FastifyReply, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const raw = reply.raw;
  if (raw.headersSent || raw.destroyed || raw.writableEnded) {
    raw.destroy();
    return;
  }
  const text = body === undefined ? '' : JSON.stringify(body);
  raw.writeHead(status, {
    ...replyHeaders(reply),
    ...(text ? { 'content-type': 'application/json; charset=utf-8' } : {}),
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  raw.end(text);
}

/** Headers set on the reply before it was hijacked (an auth layer's, for one). */
function replyHeaders(reply: FastifyReply): Record<string, string> {
  return Object.fromEntries(Object.entries(reply.getHeaders()).map(([k, v]) => [k, String(v)]));
}
