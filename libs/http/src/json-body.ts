import { InvalidRequestError } from '../../engine/src/core/errors';

/**
 * A body declared inline (no DTO class, which the validation pipe checks) as the object it must
 * be: none is {}, and a string, array, number or null is the spec's 400.
 */
export function jsonObject(body: unknown): Record<string, unknown> {
  if (body === undefined) return {};
  if (body === null || typeof body !== 'object' || Array.isArray(body) || Buffer.isBuffer(body)) {
    throw new InvalidRequestError('cannot parse request: the body must be a JSON object');
  }
  return body as Record<string, unknown>;
}
