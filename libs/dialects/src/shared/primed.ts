/**
 * Waits for a stream's first event before its renderer writes anything: a request
 * that fails before producing a token (a constraint that allows none, a queue
 * timeout) then throws while no frame has gone out, and gets its error status and
 * body instead of a stream cut after its opening frames. The opening frames go out
 * with the first token, which is when a client could use them anyway.
 */
export async function primed<T>(events: AsyncIterable<T>): Promise<AsyncIterable<T>> {
  const it = events[Symbol.asyncIterator]();
  let first: IteratorResult<T> | undefined = await it.next();
  const rest: AsyncIterator<T> = {
    next: () => {
      if (!first) return it.next();
      const r = first;
      first = undefined;
      return Promise.resolve(r);
    },
    // a renderer that stops early (client gone) still ends the generation
    return: (value?: unknown) => (it.return ? it.return(value) : Promise.resolve({ done: true as const, value: value as T })),
  };
  return { [Symbol.asyncIterator]: () => rest };
}
