import { KvFullError, NoModelError, QueueFullError } from '../../libs/engine/src/core/errors';
import { toHttpFailure } from '../../libs/http/src/http-errors';

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
