import { DETECTORS } from './detectors';

export interface Finding {
  type: string;
  /** Offsets in the original text, in UTF-16 code units (JavaScript's string indexes), end exclusive. */
  start: number;
  end: number;
}

export interface Redacted {
  text: string;
  findings: Finding[];
}

/** The text with each finding replaced by its tag ([EMAIL]); `types` limits the detectors (all by default). */
export function redact(text: string, types?: readonly string[]): Redacted {
  const findings: Finding[] = [];
  // Detectors in priority order, each on the text less what earlier ones found (blanked out, same
  // offsets): a span that overlapped an earlier finding was dropped whole, and with it a card after
  // an IBAN ("DE89 3704 0044 0532 0130 00 4111 1111 1111 1111").
  let rest = text;
  for (const d of DETECTORS) {
    if (types && !types.includes(d.type)) continue;
    const spans = joined(d.find(rest));
    for (const [start, end] of spans) findings.push({ type: d.type, start, end });
    if (spans.length) rest = blanked(rest, spans);
  }
  findings.sort((a, b) => a.start - b.start);
  let out = '';
  let at = 0;
  for (const f of findings) {
    out += `${text.slice(at, f.start)}[${f.type.toUpperCase()}]`;
    at = f.end;
  }
  return { text: out + text.slice(at), findings };
}

/** Spans of one type in order, overlapping ones joined (an IPv6 address and its IPv4 tail are one). */
function joined(spans: Array<[number, number]>): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  const sorted = spans.every((x, i) => i === 0 || spans[i - 1][0] <= x[0]) ? spans : [...spans].sort((a, b) => a[0] - b[0]);
  for (const [s, e] of sorted) {
    const last = out[out.length - 1];
    if (last && s < last[1]) last[1] = Math.max(last[1], e);
    else out.push([s, e]);
  }
  return out;
}

/** `text` with the spans replaced by NUL, which no pattern takes and every pattern may stand beside. */
function blanked(text: string, spans: Array<[number, number]>): string {
  const parts: string[] = [];
  let at = 0;
  for (const [s, e] of spans) {
    parts.push(text.slice(at, s), '\0'.repeat(e - s));
    at = e;
  }
  parts.push(text.slice(at));
  return parts.join('');
}
