import { EngineError } from '../core/errors';

export class ContextNotFoundError extends EngineError {
  constructor(id: string) {
    super(`no such context on this model: ${id}`, 404);
  }
}

export class ContextBusyError extends EngineError {
  constructor() {
    super('this context is in use by another request; retry when that one finishes', 409);
  }
}

/**
 * Every resident context is bound to a running request (idle ones would have been spilled), or
 * running requests hold every sequence: a wait, not a fault. 429 with Retry-After: 1, as the
 * spec's full queue, so the official clients retry by themselves.
 */
export class ContextCapacityError extends EngineError {
  constructor() {
    super('no room for another context while the resident ones are in use: retry', 429);
  }
}
