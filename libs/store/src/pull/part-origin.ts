import { readFileSync, rmSync, writeFileSync } from 'node:fs';

/**
 * What a plain URL's part file was started with: the validator `If-Range` carries
 * (a strong ETag, else Last-Modified) and the whole file's size. A URL has no digest,
 * so these are all that tells a resumed reply from another file's bytes: a server may
 * ignore If-Range and answer 206 from a file replaced in between.
 */
export interface PartOrigin {
  validator: string;
  /** Whole-file size the first reply declared; undefined when it declared none (or an old part). */
  total?: number;
}

/** Kept beside the part as `<part>.validator`: the validator, then the total on a second line. */
export const originFile = (part: string): string => `${part}.validator`;

/** From the reply the part's first bytes came with; without a validator nothing is kept (the part cannot resume). */
export function recordOrigin(part: string, r: Response): void {
  const etag = r.headers.get('etag');
  const validator = etag && !etag.startsWith('W/') ? etag : r.headers.get('last-modified');
  if (!validator) return void rmSync(originFile(part), { force: true });
  // A 206 declares the whole size in Content-Range; a 200's (unencoded) Content-Length is the whole.
  const whole = r.status === 200 && !r.headers.get('content-encoding') ? count(r.headers.get('content-length')) : undefined;
  const total = rangeOf(r.headers)?.total ?? whole;
  writeFileSync(originFile(part), total === undefined ? validator : `${validator}\n${total}`);
}

export function readOrigin(part: string): PartOrigin | undefined {
  let text: string;
  try {
    text = readFileSync(originFile(part), 'utf8');
  } catch {
    return undefined;
  }
  const [validator, total] = text.split('\n');
  return validator ? { validator, total: count(total) } : undefined;
}

/**
 * Why a 206 cannot continue a part started at `origin` (undefined when it can): another
 * validator than the one stored (or none), another total size, or bytes from elsewhere than `from`.
 */
export function changedSince(origin: PartOrigin, h: Headers, from: number): string | undefined {
  // An ETag is a quoted string; anything else stored is a Last-Modified date.
  const now = origin.validator.startsWith('"') ? h.get('etag') : h.get('last-modified');
  if (now !== origin.validator) return `the server's validator is now ${now ?? 'absent'}, not ${origin.validator}`;
  const range = rangeOf(h);
  if (range?.total !== undefined && origin.total !== undefined && range.total !== origin.total) return `the file is now ${range.total} bytes, not ${origin.total}`;
  if (range && range.start !== from) return `the server sent bytes from ${range.start}, not ${from}`;
  return undefined;
}

// `Content-Range: bytes 5-9/10`, or `bytes */10` on a 416.
export function rangeOf(h: Headers): { start?: number; total?: number } | undefined {
  const m = /^bytes\s+(?:(\d+)-\d+|\*)\/(\d+|\*)$/i.exec(h.get('content-range')?.trim() ?? '');
  return m ? { start: count(m[1]), total: count(m[2]) } : undefined;
}

function count(s: string | null | undefined): number | undefined {
  const n = s && /^\d+$/.test(s) ? Number(s) : NaN;
  return Number.isSafeInteger(n) ? n : undefined;
}
