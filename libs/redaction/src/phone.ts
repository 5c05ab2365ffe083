/**
 * Which digit groups are a phone number. With a + (an international number) any grouping of
 * 7-15 digits is. Without one, the shape must be a phone's and not a date's, an amount's or an
 * order number's:
 * - one separator throughout ("555-123-4567 24 hours" is a phone and a count, not one number);
 * - never day-month-year or year-month-day (29.11.2026, 05.11.2026, 2026-11-29);
 * - and one of: every group after the first has 3+ digits (555-123-4567, 030 1234567,
 *   07700 900123); a leading 0 (a national trunk prefix: 06 12 34 56 78, 079 123 45 67); or four
 *   groups and more of 2+ digits, 9-12 in all (612 34 56 78).
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
  if (!area && groups[0].length < 2) return false;
  const rest = groups.slice(1);
  if (rest.every((g) => g.length >= 3)) return true;
  if (groups.every((g) => g.length >= 2)) {
    if (groups[0].startsWith('0')) return true;
    if (groups.length >= 4 && n >= 9 && n <= 12) return true;
  }
  return false;
}

/**
 * Where a run may be cut short: only at a separator the number itself does not use, so
 * "555-123-4567 24" gives the phone, while "4111 1111 1111 1112" (no card) gives no phone either.
 */
export function phoneCut(m: string, at: number): boolean {
  const lead = /^(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?/.exec(m)![0].length;
  return at > lead && !m.slice(lead, at).includes(m[at]);
}
