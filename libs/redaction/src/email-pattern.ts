/**
 * E-mail addresses in any alphabet (RFC 6531: josé.garcía@empresa.es, user@münchen.de): an
 * ASCII-only pattern redacted half a name ("josé.garcí[EMAIL]").
 *
 * The first pattern finds addresses inside running text. Letters of scripts written without spaces
 * between words (Han, kana, Thai, Lao, Khmer, Myanmar) are left out of it, so the text around an
 * address there is not taken with it (Hangul is written with spaces: its addresses are found). An
 * apostrophe counts between letters (o'brien@example.ie), never first, so a quoted address keeps
 * its quote. `=` does not count: "email=bob@example.com" keeps its key.
 *
 * The second finds an address set apart by spaces or punctuation, in any script
 * (用户@例子.广告, bob@例子.中国): there the delimiters say where it begins and ends.
 * (The `v` flag's set difference; built from a string, as TypeScript's ES2022 target lacks it.)
 */
const UNSPACED = String.raw`[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Thai}\p{sc=Lao}\p{sc=Khmer}\p{sc=Myanmar}]`;
const WORD = String.raw`[[\p{L}\p{M}\p{N}]--${UNSPACED}]`;
const LETTER = String.raw`[[\p{L}\p{M}]--${UNSPACED}]`;
const LOCAL = String.raw`[${WORD}._%+\-]`;
const LOCAL_INNER = String.raw`(?:${LOCAL}|'(?=${WORD}))`;
const LABEL = String.raw`[${WORD}\-]+`;
// Starts only where a run of local-part characters starts: from inside a long run each try would
// scan it again (quadratic: ".'a" repeated took 37 s for 300 KB). An apostrophe after a local-part
// character is inside a run, so no start follows it; one after anything else is a quote.
const IN_TEXT = new RegExp(String.raw`(?<!${LOCAL}|${LOCAL}')${LOCAL}${LOCAL_INNER}*@${LABEL}(?:\.${LABEL})*\.${LETTER}{2,}`, 'gv');

const STOP = String.raw`\s@<>()\[\]{},;:"'「」『』（）【】、，。！？`;
const SET_APART = new RegExp(
  String.raw`(?<=^|[\s<(\[{,;:"'「『（【])[^${STOP}]+@(?:[^${STOP}.]+\.)+[^${STOP}.\d]{2,}(?=$|[\s>)\]},;:"'」』）】、，。！？!?]|\.(?:$|\s))`,
  'gu',
);

export const EMAIL_PATTERNS: readonly RegExp[] = [IN_TEXT, SET_APART];
