/** IP addresses: IPv4 in dotted decimal, IPv6 in its RFC 4291 text forms. */

export const IPV4 = String.raw`(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)`;

/**
 * What may be an IPv6 address: hex groups and colons (at most 39 characters, the longest form),
 * maybe ending in an IPv4 address after a colon (64:ff9b::192.0.2.1). ipv6() decides.
 */
export const IPV6_CANDIDATE = String.raw`(?<![\w:])(?=[0-9A-Fa-f]*:)[0-9A-Fa-f:]{2,39}(?:(?<=:)${IPV4})?(?![\w:]|\.\d)`;

const GROUP = /^[0-9A-Fa-f]{1,4}$/;

/**
 * Whether `m` is an IPv6 address: 8 groups, or fewer with one "::" standing for the rest; an IPv4
 * tail counts as two groups. A timecode (01:02:03:04), a ratio (1:2:3:4) or a MAC address
 * (00:1A:2B:3C:4D:5E) has 4-7 groups and no "::": none is one.
 */
export function ipv6(m: string): boolean {
  let head = m;
  let groups = 0;
  const v4 = /(?<=:)\d+(?:\.\d+){3}$/.exec(m);
  if (v4) {
    head = m.slice(0, v4.index);
    if (!head.endsWith('::')) head = head.slice(0, -1);
    groups = 2;
  }
  const halves = head.split('::');
  if (halves.length > 2) return false;
  for (const half of halves) {
    if (half === '') continue;
    const parts = half.split(':');
    if (!parts.every((p) => GROUP.test(p))) return false;
    groups += parts.length;
  }
  return halves.length === 2 ? groups >= 1 && groups <= 7 : groups === 8;
}
