/**
 * Engine-level failures. HTTP layers map them to status codes in one place
 * (libs/http/src/errors), so the engine never knows about HTTP.
 */
export class EngineError extends Error {
  constructor(
    message: string,
    readonly status: number,
    /** Seconds after which the same request may succeed (a capacity wait, not a fault): Retry-After. */
    readonly retryAfter?: number,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * A flag's value the server cannot start with (a file that is not what the flag wants): the
 * process ends with status 2 and the message, as for a malformed flag, not 1 and a library's words.
 */
export class StartupError extends Error {}

export class InvalidRequestError extends EngineError {
  constructor(message: string) {
    super(message, 400);
  }
}

export class ModelNotFoundError extends EngineError {
  constructor(message: string) {
    super(message, 404);
  }
}

export class NoModelError extends EngineError {
  constructor(message = 'this server has no model. Pull one: POST /api/pull') {
    super(message, 503);
  }
}

/** The queue is full: 429 with an empty body and Retry-After: 1. */
export class QueueFullError extends EngineError {
  constructor() {
    super('queue full', 429);
  }
}

/**
 * The client went away before its answer was complete (499, nginx's "client closed request"):
 * nobody reads the answer, and it is no server fault to log.
 */
export class ClientGoneError extends EngineError {
  constructor() {
    super('the client closed the request', 499);
  }
}

export class ServerShuttingDownError extends EngineError {
  constructor(message = 'the server is shutting down') {
    super(message, 503);
  }
}

/** The KV cache had no room for this request while others ran: retry soon (503 with Retry-After). */
export class KvFullError extends EngineError {
  constructor(why: string) {
    super(`the KV cache is full (${why}): retry, or lower -concurrency or the context size`, 503, 1);
  }
}
