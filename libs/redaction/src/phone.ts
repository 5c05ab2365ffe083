/**
 * Which digit groups are a phone number. With a + (an international number) any grouping of
 * 7-15 digits is. Without one, the shape must be a phone's and not a date's, a postcode's, an
 * amount's, a list's or an order number's:
 * - one separator throughout ("555-123-4567 24 hours" is a phone and a count, not one number);
 * - never day-month-year or year-month-day (29.11.2026, 2026-11-29), nor an SSN's shape;
 * - and one of: 2-4 digits, then groups of 3-4 (555-123-4567, 1234 5678, 415.555.0132); a national
 *   trunk 0 and 2-5 digits, then groups of 2-8, 9-12 digits in all, pairs only as five
 *   (030 1234567, 07700 900123, 079 123 45 67, 06 12 34 56 78); or 3 digits and pairs, 9 in all
 *   (612 34 56 78). ZIP+4 (94103-1234), 2026-000123, 48.858370, 10-20-30-40-50, 01.02.03.04 and
 *   a row of lottery numbers are none of these.
 * A single run of digits without + is an ordinary number.
 */
export function phoneShaped(m: string): boolean {
  const n = m.replace(/\D/g, '').length;
  if (n < 7 || n > 15) return false;
  if (m.startsWith('+')) return true;
  const area = /^\(\d{1,4}\)[ .-]?/.exec(m);
  const body = area ? m.slice(area[0].length) : m;
  const groups = body.split(/[ .-]/);
  const seps = new Set(body.match(/[ .-]/g) ?? []);
  if (seps.size > 1 || groups.some((g) => g.length === 0)) return false;
  if (!area && groups.length < 2) return false;
  if (/^\d{3}-\d{2}-\d{4}$/.test(body)) return false; // SSN-shaped, issued or not
  if (groups.length === 3 && /^(\d{1,2}\D\d{1,2}\D\d{2,4}|\d{4}\D\d{1,2}\D\d{1,2})$/.test(body)) return false;
  const [first, ...rest] = groups;
  const between = (g: string, lo: number, hi: number) => g.length >= lo && g.length <= hi;
  if ((area || between(first, 2, 4)) && rest.every((g) => between(g, 3, 4))) return true;
  if (first.startsWith('0') && between(first, 2, 5) && rest.every((g) => between(g, 2, 8)) && n >= 9 && n <= 12) {
    return !groups.every((g) => g.length === 2) || groups.length === 5;
  }
  return first.length === 3 && rest.length >= 3 && rest.every((g) => g.length === 2) && n === 9;
}

/**
 * Where a run may be cut short: only at a separator the number itself does not use, so
 * "555-123-4567 24" gives the phone, while "4111 1111 1111 1112" (no card) gives no phone either.
 */
export function phoneCut(m: string, at: number): boolean {
  const lead = m[0] === '+' || m[0] === '(' ? /^(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?/.exec(m)![0].length : 0;
  return at > lead && m.indexOf(m[at], lead) === at;
}

/**
 * Whether a phone may start inside `run`, digit groups that are no phone as a whole
 * ("x 7 555 123 4567" holds one). Not where the run is one number: groups all of one length
 * ("4111 1111 1111 1112", a row of lottery numbers) or in thousands (1 234 567 890).
 */
export function phoneLater(run: string): boolean {
  if (run !== last.run) last = { run, may: mayStartLater(run) };
  return last.may;
}

// phoneLater is asked once for each group of a run: the answer for the last run is kept.
let last = { run: '', may: false };

function mayStartLater(run: string): boolean {
  const groups = run.split(/\D+/).filter((g) => g.length > 0);
  if (groups.every((g) => g.length === groups[0].length)) return false;
  const [first, ...rest] = groups;
  return !(first.length <= 3 && rest.every((g) => g.length === 3));
}
