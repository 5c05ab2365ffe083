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

export class ContextCapacityError extends EngineError {
  constructor() {
    super('no room for another context: delete some first', 503);
  }
}
