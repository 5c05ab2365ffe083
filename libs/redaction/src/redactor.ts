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
  // Characters an earlier finding covers: detectors in priority order, a span one found is not found again.
  const covered = new Uint8Array(text.length);
  const taken = (s: number, e: number) => covered.subarray(s, e).includes(1);
  for (const d of DETECTORS) {
    if (types && !types.includes(d.type)) continue;
    for (const [start, end] of d.find(text)) {
      if (taken(start, end)) continue;
      covered.fill(1, start, end);
      findings.push({ type: d.type, start, end });
    }
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
