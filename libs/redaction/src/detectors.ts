/**
 * Personal data found by pattern, with a checksum where the format has one (cards: Luhn, IBANs:
 * mod 97 and the country's length), so that an order number or a date is not taken for a card or a
 * phone. Each detector finds spans in the text; redact() runs them in the order listed, each on the
 * text less what earlier ones found (an e-mail's digits are not a phone number, an IBAN's digits
 * are not a card).
 */
import { findEmails } from './email';
import { ibanLength, ibanValid } from './iban';
import { IPV4, IPV6_CANDIDATE, ipv6 } from './ip';
import { phoneCut, phoneLater, phoneShaped } from './phone';

export interface Detector {
  /** The type name in findings and in `types`; its tag is the upper-case form ([EMAIL]). */
  type: string;
  find(text: string): Array<[number, number]>;
}

interface Checks {
  /** Whether a span is one (a checksum, a shape); all are by default. */
  accept?: (m: string) => boolean;
  /** Whether a span may be cut short at `at`; anywhere a group ends by default. */
  cut?: (m: string, at: number) => boolean;
  /** Whether a span may start at `at` inside `run`, the last match that held none; anywhere by default. */
  later?: (run: string, at: number) => boolean;
}

/**
 * Spans of `re` that `accept` takes. A pattern reaches as far as its shape allows, so a valid
 * number followed by a short word or number ("4111 1111 1111 1111 123", "BE68 5390 0754 7034 BIC")
 * fails its check as a whole: then the longest shorter span ending where a group ends is tried.
 * When none is taken the scan goes on from the next character, not after the whole run: a number
 * may follow another ("row 3 4111111111111111", "x 7 555 123 4567"). Every pattern here is
 * bounded in length, so each start costs a bounded amount and the scan stays linear.
 */
function matches(re: RegExp, text: string, { accept = () => true, cut = () => true, later = () => true }: Checks = {}): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  const scan = new RegExp(re.source, re.flags.includes('g') ? re.flags : `${re.flags}g`);
  let run: { start: number; text: string } | undefined;
  for (let m = scan.exec(text); m; m = scan.exec(text)) {
    const start = m.index;
    const inRun = run && start < run.start + run.text.length ? run : undefined;
    const end = inRun && !later(inRun.text, start - inRun.start) ? 0 : takenEnd(m[0], accept, cut);
    if (end > 0) {
      out.push([start, start + end]);
      scan.lastIndex = start + end;
    } else {
      if (!inRun) run = { start, text: m[0] };
      scan.lastIndex = start + 1;
    }
  }
  return out;
}

const isCut = (c: number) => c === 32 || c === 46 || c === 45 || (c >= 9 && c <= 13); // space, dot, dash
const isAlnum = (ch: string) => /[\p{L}\p{N}]/u.test(ch);

/** Length of the longest prefix of `m` that `accept` takes, cut only where a group ends; 0 when none. */
function takenEnd(m: string, accept: (m: string) => boolean, cut: (m: string, at: number) => boolean): number {
  if (accept(m)) return m.length;
  for (let i = m.length - 1; i > 0; i--) {
    if (isCut(m.charCodeAt(i)) && isAlnum(m[i - 1]) && cut(m, i) && accept(m.slice(0, i))) return i;
  }
  return 0;
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

/**
 * How cards are written: 13-19 digits unbroken, in fours (the last group shorter), or 4-6-5 and
 * 4-6-4 (Amex, Diners), one separator throughout. Any grouping let "555 123 4567 4111" (a phone and
 * a card's first group) pass Luhn by chance and hide the card behind it.
 */
const CARD = String.raw`\d{13,19}|\d{4}([ -])\d{4}\1\d{4}\1(?:\d{4}\1\d{1,3}|\d{1,4})|\d{4}([ -])\d{6}\2\d{4,5}`;
const CARD_SHAPE = new RegExp(`^(?:${CARD})$`);

export const DETECTORS: Detector[] = [
  { type: 'email', find: findEmails },
  // Before cards: ~1 in 10 German IBANs holds a Luhn-valid run of 18 digits, and the IBAN's check is the stronger.
  {
    type: 'iban',
    find: (t) =>
      matches(/\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b/g, t, {
        // The length first: the mod-97 check on each shorter span made a run of "DE89 " slow.
        accept: (m) => {
          let len = m.length;
          for (let i = 0; i < m.length; i++) if (m.charCodeAt(i) === 32) len--;
          const want = ibanLength(m.slice(0, 2));
          return (want === undefined || len === want) && ibanValid(m.replace(/ /g, ''));
        },
      }),
  },
  // Luhn-valid, as cards are written; never after a + (+4915112345678 is a phone that passes Luhn).
  { type: 'credit_card', find: (t) => matches(new RegExp(`(?<![\\d+-])(?:${CARD})(?![\\d-])`, 'g'), t, { accept: (m) => CARD_SHAPE.test(m) && luhn(digits(m)) }) },
  // US social security numbers as written (area 000, 666 and 900-999 are never issued).
  { type: 'ssn', find: (t) => matches(/(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])/g, t) },
  {
    type: 'ip_address',
    // An IPv6 address with an IPv4 tail is found by both; redact() joins the overlapping spans.
    find: (t) => [...matches(new RegExp(String.raw`(?<!\d|\d\.)${IPV4}(?!\d|\.\d)`, 'g'), t), ...matches(new RegExp(IPV6_CANDIDATE, 'g'), t, { accept: ipv6, cut: () => false })],
  },
  // Phone numbers: a +country code and 7-15 digits in any groups, or an optional (area) and groups
  // of up to 8 digits (030 12345678); phone.ts decides which group shapes are phones.
  {
    type: 'phone',
    find: (t) =>
      matches(/(?<![\w+])(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,15}(?:[ .-]\d{1,15}){0,6}|(?:\(\d{1,4}\)[ .-]?)?\d{1,8}(?:[ .-]\d{1,8}){0,6})(?![\w-])/g, t, { accept: phoneShaped, cut: phoneCut, later: phoneLater }),
  },
];

export const DETECTOR_TYPES = DETECTORS.map((d) => d.type);
