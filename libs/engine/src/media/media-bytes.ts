import { InvalidRequestError } from '../core/errors';
import { CoreContentPart } from '../core/generation-request';

export type CoreMediaPart = Extract<CoreContentPart, { type: 'media' }>;

/** An image larger than this (bytes, decoded) is refused: llama-server's URL fetch has no cap; a body has 32 MiB. */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024;
/** An image URL that has not answered whole by then is refused. */
export const IMAGE_FETCH_TIMEOUT_MS = 10_000;

export interface MediaFetchOptions {
  maxBytes?: number;
  timeoutMs?: number;
  /** The request's own signal: a client gone ends the fetch. */
  signal?: AbortSignal;
}

/**
 * The bytes of one image part, from whichever form a dialect gave: base64 data, a data: URL,
 * or an http(s) URL fetched with a time limit and a size cap. Bad input is a 400 naming the image.
 */
export function imageBytes(part: CoreMediaPart, n: number, opts: MediaFetchOptions = {}): Promise<Buffer> {
  return partBytes(part, `image ${n}`, opts);
}

/** The bytes of any media part (image, video, PDF); `what` names it in a refusal ("video 2"). */
export async function partBytes(part: CoreMediaPart, what: string, opts: MediaFetchOptions = {}): Promise<Buffer> {
  const maxBytes = opts.maxBytes ?? MAX_IMAGE_BYTES;
  const url = part.url;
  if (url !== undefined && /^https?:\/\//i.test(url)) return fetchBytes(url, what, maxBytes, opts);
  let data = part.data;
  if (data === undefined && url !== undefined) {
    const m = /^data:([^;,]*)(;base64)?,(.*)$/s.exec(url);
    if (!m || !m[2]) throw new InvalidRequestError(`${what}: the URL must be http(s) or a base64 data: URL`);
    data = m[3];
  }
  if (data === undefined) throw new InvalidRequestError(`${what}: no data or URL`);
  // A data URL pasted whole into a base64 field (the local runner's images) is taken too.
  const inline = /^data:[^;,]*;base64,(.*)$/s.exec(data);
  if (inline) data = inline[1];
  const compact = data.replace(/\s+/g, '');
  if (compact.length === 0 || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(compact)) throw new InvalidRequestError(`${what}: the data is not base64`);
  if ((compact.length * 3) / 4 > maxBytes + 3) throw new InvalidRequestError(`${what} is larger than ${maxBytes} bytes`);
  return Buffer.from(compact, 'base64');
}

/**
 * Every way a URL can fail to answer reads the same: "refused" against "answered 404" told a
 * caller which internal hosts and ports are there. A timeout is the one said apart, since the
 * caller's fix (a faster host) differs.
 */
async function fetchBytes(url: string, what: string, maxBytes: number, opts: MediaFetchOptions): Promise<Buffer> {
  const timeoutMs = opts.timeoutMs ?? IMAGE_FETCH_TIMEOUT_MS;
  const signals = [AbortSignal.timeout(timeoutMs), ...(opts.signal ? [opts.signal] : [])];
  const signal = AbortSignal.any(signals);
  const unfetchable = (err?: unknown): InvalidRequestError => {
    const e = err as Error | undefined;
    if (e?.name === 'TimeoutError') return new InvalidRequestError(`${what}: ${url} did not answer whole within ${timeoutMs} ms`);
    if (e?.name === 'AbortError') return new InvalidRequestError(`${what}: the request was cancelled`);
    return new InvalidRequestError(`${what}: ${url} could not be fetched`);
  };
  let res: Response;
  try {
    res = await fetch(url, { signal, redirect: 'follow' });
  } catch (err) {
    throw unfetchable(err);
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => undefined);
    throw unfetchable();
  }
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel().catch(() => undefined);
    throw new InvalidRequestError(`${what}: ${url} is ${declared} bytes; it is taken up to ${maxBytes}`);
  }
  // Read with the cap: a server that sends no length (or lies about it) is cut off at the cap.
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of res.body ?? []) {
      total += chunk.byteLength;
      if (total > maxBytes) {
        await res.body?.cancel().catch(() => undefined);
        throw new InvalidRequestError(`${what}: ${url} is larger than ${maxBytes} bytes`);
      }
      chunks.push(Buffer.from(chunk));
    }
  } catch (err) {
    if (err instanceof InvalidRequestError) throw err;
    throw unfetchable(err);
  }
  return Buffer.concat(chunks);
}

/** Bytes of the images one request reads, together: 60 URLs of 19 MB each took the server to 3 GB (their count: media-thinning). */
export const MAX_IMAGE_BYTES_TOTAL = 64 * 1024 * 1024;
/** Pixels an image may decode to (4096 x 4096): a 420 KB PNG of 12000 x 12000 decoded to 432 MB. */
export const MAX_IMAGE_PIXELS = 4096 * 4096;

/**
 * Width and height from an image's header, for the formats whose header says so in a fixed place
 * (PNG, GIF, BMP, PSD) or in a frame marker (JPEG); undefined for others (stb_image decides).
 */
export function imageDimensions(b: Buffer): { width: number; height: number } | undefined {
  if (b.length >= 24 && b.readUInt32BE(0) === 0x89504e47 && b.toString('latin1', 12, 16) === 'IHDR') return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
  if (b.length >= 10 && b.toString('latin1', 0, 4) === 'GIF8') return { width: b.readUInt16LE(6), height: b.readUInt16LE(8) };
  if (b.length >= 26 && b.toString('latin1', 0, 2) === 'BM') return { width: Math.abs(b.readInt32LE(18)), height: Math.abs(b.readInt32LE(22)) };
  if (b.length >= 22 && b.toString('latin1', 0, 4) === '8BPS') return { width: b.readUInt32BE(18), height: b.readUInt32BE(14) };
  // PNM (P1-P6): magic, then width and height as text, with comments between.
  if (b.length >= 3 && b[0] === 0x50 && b[1] >= 0x31 && b[1] <= 0x36 && /\s/.test(String.fromCharCode(b[2]))) {
    const head = b.toString('latin1', 2, Math.min(b.length, 1024)).replace(/#[^\n]*\n/g, ' ');
    const m = /^\s*(\d+)\s+(\d+)/.exec(head);
    return m ? { width: Number(m[1]), height: Number(m[2]) } : undefined;
  }
  // Radiance HDR: header lines, a blank line, then "-Y <height> +X <width>".
  if (b.length >= 10 && /^#\?(RADIANCE|RGBE)/.test(b.toString('latin1', 0, 10))) {
    const m = /\n\n[-+]Y (\d+) [-+]X (\d+)/.exec(b.toString('latin1', 0, Math.min(b.length, 4096)));
    return m ? { width: Number(m[2]), height: Number(m[1]) } : undefined;
  }
  if (b.length >= 4 && b[0] === 0xff && b[1] === 0xd8) {
    // Segments until a start-of-frame (C0-CF less C4 DHT, C8 JPG, CC DAC): height, then width.
    for (let i = 2; i + 9 < b.length; ) {
      if (b[i] !== 0xff) return undefined;
      const marker = b[i + 1];
      if (marker === 0xff) {
        i++;
        continue;
      }
      if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) return { width: b.readUInt16BE(i + 7), height: b.readUInt16BE(i + 5) };
      if (marker === 0xd8 || (marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) {
        i += 2;
        continue;
      }
      i += 2 + b.readUInt16BE(i + 2);
    }
  }
  return undefined;
}

/**
 * Refuses an image whose header says it decodes to more than MAX_IMAGE_PIXELS, and one whose size
 * cannot be read from its header (TGA has no magic: 65535 x 65535 decodes to 12 GB).
 */
export function checkImagePixels(b: Buffer, n: number): void {
  const d = imageDimensions(b);
  if (!d) throw new InvalidRequestError(`image ${n} cannot be decoded: not a PNG, JPEG, GIF, BMP, PSD, PNM or HDR image`);
  if (d.width * d.height > MAX_IMAGE_PIXELS) {
    throw new InvalidRequestError(`image ${n} is ${d.width}x${d.height} pixels; images are taken up to ${MAX_IMAGE_PIXELS} pixels (4096x4096)`);
  }
}
