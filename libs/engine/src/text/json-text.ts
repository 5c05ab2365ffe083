/**
 * JSON text without its insignificant whitespace, every value written as it was: re-serialising
 * through JSON.parse rounded integers past 2^53 (a model's 16-digit id came back off by one) and
 * rewrote numbers and escapes. The text must already be valid JSON.
 */
export function minifiedJson(text: string): string {
  let out = '';
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      // Copy the string whole: whitespace and escaped quotes inside it are its own.
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      i = j;
    } else if (c === ' ' || c === '\n' || c === '\r' || c === '\t') {
      out += text.slice(from, i);
      from = i + 1;
    }
  }
  return out + text.slice(from);
}
