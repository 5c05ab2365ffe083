/**
 * Personal data found by pattern, with a checksum where the format has one (cards: Luhn, IBANs:
 * mod 97 and the country's length), so that an order number or a date is not taken for a card or a
 * phone. Each detector finds spans in the text; redact() resolves overlaps in the order listed (an
 * e-mail's digits are not a phone number, an IBAN's digits are not a card).
 */
import { EMAIL_PATTERNS } from './email-pattern';
import { ibanLength, ibanValid } from './iban';
import { phoneCut, phoneShaped } from './phone';

export interface Detector {
  /** The type name in findings and in `types`; its tag is the upper-case form ([EMAIL]). */
  type: string;
  find(text: string): Array<[number, number]>;
}

/**
 * Spans of `re` that `accept` takes. A pattern reaches as far as its shape allows, so a valid
 * number followed by a short word or number ("4111 1111 1111 1111 123", "BE68 5390 0754 7034 BIC")
 * fails its check as a whole: then the longest shorter span ending where a group ends is tried, and
 * the scan goes on right after what was taken.
 */
function matches(re: RegExp, text: string, accept: (m: string) => boolean = () => true, cut: (m: string, at: number) => boolean = () => true): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  const scan = new RegExp(re.source, re.flags.includes('g') ? re.flags : `${re.flags}g`);
  for (let m = scan.exec(text); m; m = scan.exec(text)) {
    const start = m.index;
    const end = takenEnd(m[0], accept, cut);
    if (end > 0) {
      out.push([start, start + end]);
      scan.lastIndex = start + end;
    } else if (m[0].length === 0) scan.lastIndex++;
  }
  return out;
}

/** Length of the longest prefix of `m` that `accept` takes, cut only where a group ends; 0 when none. */
function takenEnd(m: string, accept: (m: string) => boolean, cut: (m: string, at: number) => boolean): number {
  if (accept(m)) return m.length;
  for (let i = m.length - 1; i > 0; i--) {
    if (/[\s.\-]/.test(m[i]) && /[\p{L}\p{N}]/u.test(m[i - 1]) && cut(m, i) && accept(m.slice(0, i))) return i;
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

const IPV4 = String.raw`(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)`;

export const DETECTORS: Detector[] = [
  {
    type: 'email',
    find: (t) => EMAIL_PATTERNS.flatMap((re) => matches(re, t)),
  },
  // Before cards: ~1 in 10 German IBANs holds a Luhn-valid run of 18 digits, and the IBAN's check is the stronger.
  {
    type: 'iban',
    find: (t) =>
      matches(/\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b/g, t, (m) => {
        const s = m.replace(/ /g, '');
        const want = ibanLength(s.slice(0, 2));
        return (want === undefined || s.length === want) && ibanValid(s);
      }),
  },
  // 13-19 digits in groups separated by single spaces or dashes, Luhn-valid.
  { type: 'credit_card', find: (t) => matches(/(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])/g, t, (m) => { const d = digits(m); return d.length >= 13 && luhn(d); }) },
  // US social security numbers as written (area 000, 666 and 900-999 are never issued).
  { type: 'ssn', find: (t) => matches(/(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])/g, t) },
  {
    type: 'ip_address',
    find: (t) => [
      // IPv4-mapped and -compatible IPv6 first (::ffff:192.0.2.1 left "::ffff:" beside the IPv4's tag).
      ...matches(new RegExp(String.raw`(?<![\w:])::(?:ffff(?::0{1,4})?:)?${IPV4}(?!\d|\.\d)`, 'gi'), t),
      ...matches(new RegExp(String.raw`(?<!\d|\d\.)${IPV4}(?!\d|\.\d)`, 'g'), t),
      // IPv6: full or compressed (at least three groups, or a ::), and :: first (::1).
      ...matches(/(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){2,7}[0-9A-Fa-f]{1,4}(?![\w:])|(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){1,6}:(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,5})?(?![\w:])/g, t, (m) => m.includes('::') || m.split(':').length >= 4),
      ...matches(/(?<![\w:])::[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,6}(?![\w:.])/g, t),
    ],
  },
  // Phone numbers: an optional +country code and (area), then 7-15 digits in groups; phone.ts decides which group shapes are phones.
  {
    type: 'phone',
    find: (t) => [
      ...matches(/(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{1,7}(?:[ .-]\d{1,7}){0,6}(?![\w-])|(?<![\w+])\+\d{8,15}(?!\w)/g, t, phoneShaped, phoneCut),
    ],
  },
];

export const DETECTOR_TYPES = DETECTORS.map((d) => d.type);
