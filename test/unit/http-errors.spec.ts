import Fastify from 'fastify';
import { connect, AddressInfo } from 'node:net';
import { KvFullError, NoModelError, QueueFullError } from '../../libs/engine/src/core/errors';
import { toHttpFailure } from '../../libs/http/src/http-errors';
import { refuseWhileClosing } from '../../libs/http/src/transport-errors';

describe('engine errors as HTTP failures', () => {
  it('a capacity wait carries Retry-After; a fault or the no-model state does not', () => {
    expect(toHttpFailure(new QueueFullError())).toEqual({ status: 429, message: 'queue full', headers: { 'retry-after': '1' } });
    // The KV cache full while others ran: a 503 the same request may pass a moment later.
    expect(toHttpFailure(new KvFullError('the running requests filled it first'))).toEqual({
      status: 503,
      message: 'the KV cache is full (the running requests filled it first): retry, or lower -concurrency or the context size',
      headers: { 'retry-after': '1' },
    });
    expect(toHttpFailure(new NoModelError()).headers).toBeUndefined();
  });
});

describe('requests that arrive while the server stops', () => {
  /** Sends a request whose headers were half written before the close began (an idle socket would just be closed). */
  async function lateRequest(port: number, path: string, startClose: () => void): Promise<{ head: string; body: unknown }> {
    const socket = connect(port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\n`);
    await new Promise((r) => setTimeout(r, 30));
    startClose();
    await new Promise((r) => setTimeout(r, 30));
    socket.write('\r\n');
    let raw = '';
    socket.on('data', (d) => (raw += d.toString('latin1')));
    await new Promise((r) => socket.once('close', r));
    const [head, body] = raw.split('\r\n\r\n');
    return { head, body: JSON.parse(body) };
  }

  it("answer 503 in the route's dialect and close their connection (not Fastify's own shape)", async () => {
    for (const [path, body] of [
      ['/api/tags', { error: 'the server is shutting down' }],
      ['/v1/models', { error: { message: 'the server is shutting down', type: 'Service Unavailable' } }],
    ] as const) {
      const app = Fastify({ return503OnClosing: false });
      app.get(path, async () => ({ listed: [] }));
      refuseWhileClosing(app);
      await app.listen({ port: 0, host: '127.0.0.1' });
      let closed: Promise<void> | undefined;
      const late = await lateRequest((app.server.address() as AddressInfo).port, path, () => (closed = app.close()));
      expect(late.head).toMatch(/^HTTP\/1\.1 503 /);
      expect(late.head).toMatch(/\r\nconnection: close/i);
      expect(late.body).toEqual(body);
      await closed;
    }
  });
});
