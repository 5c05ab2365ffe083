import { FastifyReply } from 'fastify';

/**
 * Server-sent events (and NDJSON) on the raw socket. The reply is hijacked so
 * frames go out as soon as they are written.
 */
export class StreamWriter {
  private readonly raw: FastifyReply['raw'];

  constructor(reply: FastifyReply, contentType: 'text/event-stream' | 'application/x-ndjson', headers: Record<string, string> = {}) {
    reply.hijack();
    this.raw = reply.raw;
    this.raw.writeHead(200, {
      ...Object.fromEntries(Object.entries(reply.getHeaders()).map(([k, v]) => [k, String(v)])),
      'content-type': contentType === 'text/event-stream' ? 'text/event-stream; charset=utf-8' : 'application/x-ndjson',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      ...headers,
    });
    this.raw.socket?.setNoDelay(true);
  }

  get closed(): boolean {
    return this.raw.destroyed || this.raw.writableEnded;
  }

  /** `data: <json>` frame, optionally with an `event:` line. */
  event(data: unknown, event?: string): void {
    if (this.closed) return;
    this.raw.write((event ? `event: ${event}\n` : '') + `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
  }

  line(obj: unknown): void {
    if (this.closed) return;
    this.raw.write(JSON.stringify(obj) + '\n');
  }

  end(): void {
    if (!this.closed) this.raw.end();
  }

  /** A failure after the stream began: cut the connection (no terminating frame). */
  abort(): void {
    this.raw.destroy();
  }
}
