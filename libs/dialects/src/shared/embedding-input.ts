import { InvalidRequestError } from '../../../engine/src/core/errors';

/**
 * The strings of an embedding request's input (`field` names it in errors): a string or an
 * array of them. Empty strings and token ids are refused (spec: Errors); `undefined` when the
 * input is absent or an empty array, which only the local runner accepts (a preload).
 */
export function embeddingInputs(v: unknown, field: string): string[] | undefined {
  if (v === undefined || v === null || (Array.isArray(v) && v.length === 0)) return undefined;
  const list = Array.isArray(v) ? v : [v];
  list.forEach((x, i) => {
    const at = Array.isArray(v) ? `${field}[${i}]` : field;
    if (typeof x === 'number' || (Array.isArray(x) && x.every((t) => typeof t === 'number'))) {
      throw new InvalidRequestError(`${at} holds token ids; this server embeds text: send strings`);
    }
    if (typeof x !== 'string') throw new InvalidRequestError(`${field} must be a string or an array of strings`);
    if (x === '') throw new InvalidRequestError(`${at} is an empty string: there is nothing to embed`);
  });
  return list as string[];
}
