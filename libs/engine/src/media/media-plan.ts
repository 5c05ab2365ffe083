import { InvalidRequestError } from '../core/errors';
import { CoreContentPart, CoreMessage } from '../core/generation-request';
import { CoreMediaPart, partBytes } from './media-bytes';
import { keptPictures, LOOSE, MAX_IMAGES, PictureSlot } from './media-thinning';
import { pdfPageImage, pdfPageTexts } from './pdf-pages';
import { videoFrames } from './video-frames';

/** Videos and PDFs one request may carry, and the bytes of each: each is decoded by a program of its own. */
export const MAX_VIDEOS = 4;
export const MAX_FILES = 8;
export const MAX_VIDEO_BYTES = 64 * 1024 * 1024;
export const MAX_FILE_BYTES = 32 * 1024 * 1024;

/** What a request's pictures came to: present (as `svc_media`, `X-Svc-Media`) when some were thinned. */
export interface MediaTally {
  images?: { received: number; kept: number };
  video_frames?: { received: number; kept: number };
}

/** A picture the server makes (a video frame, a PDF page): its bytes, and its name in a refusal. */
export interface MadePicture {
  /** Its bytes; a PDF page is drawn on first read, so a page thinned away is never drawn. */
  read(): Promise<Buffer>;
  label: string;
  /** Said where it was when it is left out (a frame says nothing: the video is still there). */
  note?: string;
}

/**
 * A chat prompt's media read into what a model takes: a PDF as its text (pages without text drawn
 * as images for a model with a projector), a video as frames. Pictures are then selected under a
 * count (select), once for the request's limits and again, fewer, when they overflow the context.
 */
export class MediaPlan {
  constructor(
    private readonly messages: CoreMessage[],
    /** Each picture part of `messages`, in prompt order, with its thinning group. */
    private readonly pictures: Array<{ part: CoreMediaPart; slot: PictureSlot }>,
    /** Frames the videos hold at the nominal rate (before any thinning). */
    private readonly nominalFrames: number,
    readonly made: WeakMap<CoreMediaPart, MadePicture>,
    /** The caller's images by their number in the request, for refusals after thinning ("image 2" stays image 2). */
    readonly numbers: WeakMap<CoreMediaPart, number>,
  ) {}

  /**
   * The caller's images already read, for a second tokenizing of the same prompt (thinned to fit).
   * Held by the plan, which ends with the request: a module-wide cache keyed by the parts kept
   * their bytes as long as a stored response's conversation kept the parts.
   */
  readonly fetched = new Map<CoreMediaPart, Buffer>();

  get count(): number {
    return this.pictures.length;
  }

  /** The messages with at most `total` pictures: a loose image left out leaves a note where it was. */
  select(total: number): { messages: CoreMessage[]; kept: number; tally?: MediaTally } {
    const keep = keptPictures(this.pictures.map((p) => p.slot), total);
    const dropped = new Set(this.pictures.filter((_, i) => !keep.has(i)).map((p) => p.part));
    const messages = dropped.size === 0 ? this.messages : this.messages.map((m) => withoutParts(m, dropped, this.made));
    return { messages, kept: keep.size, tally: this.tally(keep) };
  }

  private tally(keep: Set<number>): MediaTally | undefined {
    let loose = 0;
    let looseKept = 0;
    let framesKept = 0;
    this.pictures.forEach((p, i) => {
      if (p.slot.group === LOOSE) {
        loose++;
        if (keep.has(i)) looseKept++;
      } else if (keep.has(i)) framesKept++;
    });
    const t: MediaTally = {};
    if (looseKept < loose) t.images = { received: loose, kept: looseKept };
    if (framesKept < this.nominalFrames) t.video_frames = { received: this.nominalFrames, kept: framesKept };
    return t.images || t.video_frames ? t : undefined;
  }
}

function withoutParts(m: CoreMessage, dropped: Set<CoreMediaPart>, made: WeakMap<CoreMediaPart, MadePicture>): CoreMessage {
  if (!Array.isArray(m.content) || !m.content.some((p) => dropped.has(p as CoreMediaPart))) return m;
  const content: CoreContentPart[] = [];
  for (const p of m.content) {
    if (!dropped.has(p as CoreMediaPart)) content.push(p);
    // The caller's image was there: the model is told, so "the image above" still reads. A frame is the server's own.
    else {
      const note = made.has(p as CoreMediaPart) ? made.get(p as CoreMediaPart)!.note : '[image left out]';
      if (note) content.push({ type: 'text', text: note });
    }
  }
  return { ...m, content };
}

/**
 * Reads the PDFs and videos of `messages` (fetched or decoded one at a time). A model without a
 * projector still reads a PDF's text; its other media parts are left for the renderer to refuse.
 */
export async function planMedia(messages: CoreMessage[], opts: { vision: boolean; signal?: AbortSignal }): Promise<MediaPlan> {
  const made = new WeakMap<CoreMediaPart, MadePicture>();
  const numbers = new WeakMap<CoreMediaPart, number>();
  let images = 0;
  const drawable = { left: MAX_IMAGES };
  const pictures: Array<{ part: CoreMediaPart; slot: PictureSlot }> = [];
  let videos = 0;
  let files = 0;
  let nominalFrames = 0;
  const out: CoreMessage[] = [];
  for (const m of messages) {
    if (!Array.isArray(m.content) || !m.content.some((p) => p.type === 'media')) {
      out.push(m);
      continue;
    }
    const content: CoreContentPart[] = [];
    for (const p of m.content) {
      if (p.type !== 'media') content.push(p);
      else if (p.kind === 'file') {
        if (++files > MAX_FILES) throw new InvalidRequestError(`the request holds more than ${MAX_FILES} files; at most ${MAX_FILES} are read at once`);
        const what = `file ${files}`;
        const bytes = await partBytes(p, what, { signal: opts.signal, maxBytes: MAX_FILE_BYTES });
        for (const q of await pdfParts(bytes, p.name, what, opts, made, drawable)) {
          content.push(q);
          if (q.type === 'media') pictures.push({ part: q, slot: { group: LOOSE, index: pictures.length } });
        }
      } else if (p.kind === 'video' && opts.vision) {
        if (++videos > MAX_VIDEOS) throw new InvalidRequestError(`the request holds more than ${MAX_VIDEOS} videos; at most ${MAX_VIDEOS} are read at once`);
        const what = `video ${videos}`;
        const v = await videoFrames(await partBytes(p, what, { signal: opts.signal, maxBytes: MAX_VIDEO_BYTES }), what, opts.signal);
        nominalFrames += v.nominal;
        v.frames.forEach((bytes, k) => {
          const frame: CoreMediaPart = { type: 'media', kind: 'image' };
          made.set(frame, { read: async () => bytes, label: `${what} frame ${k + 1}` });
          pictures.push({ part: frame, slot: { group: what, index: k } });
          content.push(frame);
        });
      } else {
        content.push(p);
        if (p.kind === 'image') {
          numbers.set(p, ++images);
          pictures.push({ part: p, slot: { group: LOOSE, index: pictures.length } });
        }
      }
    }
    out.push({ ...m, content });
  }
  return new MediaPlan(out, pictures, nominalFrames, made, numbers);
}

/**
 * A PDF as text parts, a page at a time; a page without text (a scan) is drawn as an image for a
 * model with a projector, and noted as such for one without.
 */
async function pdfParts(bytes: Buffer, name: string | undefined, what: string, opts: { vision: boolean; signal?: AbortSignal }, made: WeakMap<CoreMediaPart, MadePicture>, drawable: { left: number }): Promise<CoreContentPart[]> {
  const { pages, more } = await pdfPageTexts(bytes, what, opts.signal);
  const parts: CoreContentPart[] = [{ type: 'text', text: `[PDF${name ? ` ${name}` : ''}, ${pages.length}${more ? '+' : ''} page${pages.length === 1 ? '' : 's'}]` }];
  for (const [i, text] of pages.entries()) {
    const head = pages.length > 1 ? `\n[page ${i + 1}]\n` : '\n';
    if (text) parts.push({ type: 'text', text: head + text });
    // No more pages of the request's PDFs are offered as pictures than it reads images.
    else if (opts.vision && drawable.left-- > 0) {
      const page: CoreMediaPart = { type: 'media', kind: 'image' };
      let drawn: Promise<Buffer> | undefined;
      const read = (): Promise<Buffer> => (drawn ??= pdfPageImage(bytes, i + 1, what, opts.signal));
      made.set(page, { read, label: `${what} page ${i + 1}`, note: '(a page image left out)' });
      parts.push({ type: 'text', text: head }, page);
    } else parts.push({ type: 'text', text: `${head}(no text on this page)` });
  }
  if (more) parts.push({ type: 'text', text: `\n[pages after ${pages.length} left out]` });
  return parts;
}
