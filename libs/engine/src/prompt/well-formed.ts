/** A UTF-16 surrogate without its other half. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * The value with every lone surrogate in its strings replaced by U+FFFD, as a UTF-8 encoder
 * does. JSON may carry one ("\ud800"), and a raw prompt is encoded so on its way to the
 * tokenizer; but messages and tools reach llama.cpp's chat code as JSON text, whose parser
 * refuses the escape: chat answered 400 "cannot render the chat template: [json.exception...]"
 * where completions answered 200.
 */
export function wellFormed<T>(value: T): T {
  if (typeof value === 'string') return value.replace(LONE_SURROGATE, '\uFFFD') as T;
  if (Array.isArray(value)) return value.map(wellFormed) as T;
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = wellFormed(v);
    return out as T;
  }
  return value;
}
