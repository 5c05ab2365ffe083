/**
 * Personal data found by pattern, with a checksum where the format has one (cards: Luhn, IBANs:
 * mod 97), so that an order number or a date is not taken for a card or a phone. Each detector
 * finds spans in the text; redact() resolves overlaps in the order listed (an e-mail's digits are
 * not a phone number).
 */
export interface Detector {
  /** The type name in findings and in `types`; its tag is the upper-case form ([EMAIL]). */
  type: string;
  find(text: string): Array<[number, number]>;
}

function matches(re: RegExp, text: string, accept: (m: string) => boolean = () => true): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (const m of text.matchAll(re)) if (accept(m[0])) out.push([m.index!, m.index! + m[0].length]);
  return out;
}

const digits = (s: string): string => s.replace(/\D/g, '');

function luhn(num: string): boolean {
  let sum = 0;
  for (let i = 0; i < num.length; i++) {
    let d = Number(num[num.length - 1 - i]);
    if (i % 2 === 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return sum % 10 === 0;
}

function ibanValid(raw: string): boolean {
  const s = raw.replace(/\s/g, '');
  if (s.length < 15 || s.length > 34) return false;
  const moved = (s.slice(4) + s.slice(0, 4)).replace(/[A-Z]/g, (c) => String(c.charCodeAt(0) - 55));
  let rem = 0;
  for (const ch of moved) rem = (rem * 10 + Number(ch)) % 97;
  return rem === 1;
}

/**
 * Addresses in any alphabet (RFC 6531: josé.garcía@empresa.es, user@münchen.de): an ASCII-only
 * pattern redacted half a name ("josé.garcí[EMAIL]"). Letters of scripts written without spaces
 * between words (Han, kana, Thai, Lao, Khmer, Myanmar) are left out, so the text around an
 * address there is not taken with it (Hangul is written with spaces: its addresses are found).
 * (The `v` flag's set difference; built from a string, as TypeScript's ES2022 target lacks it.)
 */
const WORD = String.raw`[[\p{L}\p{M}\p{N}]--[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Thai}\p{sc=Lao}\p{sc=Khmer}\p{sc=Myanmar}]]`;
const LETTER = String.raw`[[\p{L}\p{M}]--[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Thai}\p{sc=Lao}\p{sc=Khmer}\p{sc=Myanmar}]]`;
const LOCAL = String.raw`[${WORD}._%+\-]`;
const LABEL = String.raw`[${WORD}\-]+`;
const EMAIL = new RegExp(String.raw`(?<!${LOCAL})${LOCAL}+@${LABEL}(?:\.${LABEL})*\.${LETTER}{2,}`, 'gv');

export const DETECTORS: Detector[] = [
  // Starts only where a run of local-part characters starts: from inside a long run each try would scan it again.
  { type: 'email', find: (t) => matches(EMAIL, t) },
  // 13-19 digits in groups separated by single spaces or dashes, Luhn-valid.
  { type: 'credit_card', find: (t) => matches(/(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])/g, t, (m) => luhn(digits(m))) },
  { type: 'iban', find: (t) => matches(/\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b/g, t, ibanValid) },
  // US social security numbers as written (area 000, 666 and 900-999 are never issued).
  { type: 'ssn', find: (t) => matches(/(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])/g, t) },
  {
    type: 'ip_address',
    find: (t) => [
      ...matches(/(?<!\d|\d\.)(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?!\d|\.\d)/g, t),
      // IPv6: full or compressed (at least three groups, or a ::).
      ...matches(/(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){2,7}[0-9A-Fa-f]{1,4}(?![\w:])|(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){1,6}:(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,5})?(?![\w:])/g, t, (m) => m.includes('::') || m.split(':').length >= 4),
    ],
  },
  // Phone numbers: an optional +country code, then 7-15 digits in groups (brackets, spaces, dots
  // or dashes between them). Without a +, every group after the first has 3 digits or more, so
  // dates (2026-11-29), SSN-shaped and IBAN-shaped runs are not phones; a plain run of digits is
  // not one either.
  {
    type: 'phone',
    find: (t) =>
      matches(/(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]\d{2,4}){1,4}(?![\w-])|(?<![\w+])\+\d{8,15}(?!\w)/g, t, (m) => {
        const n = digits(m).length;
        if (n < 7 || n > 15) return false;
        if (m.startsWith('+')) return true;
        const groups = m.split(/[ .()-]+/).filter(Boolean);
        return groups.length > 1 && groups.slice(1).every((g) => g.length >= 3);
      }),
  },
];

export const DETECTOR_TYPES = DETECTORS.map((d) => d.type);
