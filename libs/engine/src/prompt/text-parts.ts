/**
 * Texts of one message's parts as one text, as llama.cpp joins text parts: a newline between
 * them, none before the first text written.
 */
export function joinTexts(texts: string[]): string {
  let out = '';
  for (const t of texts) out = out === '' ? t : `${out}\n${t}`;
  return out;
}
