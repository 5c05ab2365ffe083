import { InvalidRequestError } from '../core/errors';
import { NativeMediaPrompt, NativeProjector } from '../backend/native-addon';
import { checkImagePixels, CoreMediaPart, imageBytes, MAX_IMAGE_BYTES, MAX_IMAGE_BYTES_TOTAL } from './media-bytes';
import { MadePicture } from './media-plan';

/**
 * The token id written at an image's positions in a prompt's token list (llama-server's
 * LLAMA_TOKEN_NULL): no token decodes there; Context.evalMedia writes the image's embeddings.
 */
export const IMAGE_POSITION = -1;

/** One image of a prompt: positions [start, start + length) of the token list, chunk `chunk` of the media prompt. */
export interface MediaSpan {
  start: number;
  length: number;
  chunk: number;
}

/** A prompt with images, as the scheduler runs it. */
export interface PromptMedia {
  prompt: NativeMediaPrompt;
  /** In position order. */
  spans: MediaSpan[];
}

/**
 * Tokenizes a rendered prompt holding one marker per image (libmtmd splits it into text and
 * image chunks). The token list has IMAGE_POSITION where the images go, so its length counts
 * every position the prompt takes (usage.prompt_tokens counts images too, as llama-server does).
 */
export async function visionPrompt(projector: NativeProjector, text: string, images: Buffer[]): Promise<{ tokens: Int32Array; media: PromptMedia }> {
  let prompt: NativeMediaPrompt;
  try {
    prompt = await projector.tokenize(text, images, true, true);
  } catch (err) {
    throw new InvalidRequestError((err as Error).message);
  }
  const chunks = prompt.chunks;
  const total = chunks.reduce((n, c) => n + c.nTokens, 0);
  const tokens = new Int32Array(total).fill(IMAGE_POSITION);
  const spans: MediaSpan[] = [];
  let at = 0;
  chunks.forEach((c, i) => {
    if (c.type === 'text') tokens.set(c.tokens!, at);
    else spans.push({ start: at, length: c.nTokens, chunk: i });
    at += c.nTokens;
  });
  // The first answer token is sampled from the prompt's last text token: the templates always
  // close the turn after the image, a prompt ending on one has nothing to sample from.
  if (chunks.length === 0 || chunks[chunks.length - 1].type !== 'text') {
    prompt.dispose();
    throw new InvalidRequestError('the prompt ends with an image: send text after it');
  }
  return { tokens, media: { prompt, spans } };
}

/** The prompt's text tokens (image positions left out): the sampler's penalty history, the local runner's `context`. */
export function textTokens(tokens: Int32Array): Int32Array {
  return tokens.includes(IMAGE_POSITION) ? tokens.filter((t) => t !== IMAGE_POSITION) : tokens;
}

/**
 * The images' bytes (fetched, decoded from base64, or made by the server: video frames, PDF
 * pages), then the prompt tokenized around them. The caller's images are numbered among
 * themselves in a refusal ("image 2"); the server's by what they came from ("video 1 frame 3").
 */
export async function readVisionPrompt(
  projector: NativeProjector,
  text: string,
  parts: CoreMediaPart[],
  opts: { signal?: AbortSignal; made?: WeakMap<CoreMediaPart, MadePicture>; numbers?: WeakMap<CoreMediaPart, number>; fetched?: Map<CoreMediaPart, Buffer> } = {},
): Promise<{ tokens: Int32Array; media: PromptMedia }> {
  // One at a time, within what the request may still take: all at once held every body together.
  const images: Buffer[] = [];
  let left = MAX_IMAGE_BYTES_TOTAL;
  let k = 0;
  for (const p of parts) {
    const made = opts.made?.get(p);
    if (made) {
      images.push(await made.read());
      continue;
    }
    const n = opts.numbers?.get(p) ?? ++k;
    // Read once: a prompt thinned to fit its context is tokenized again with the same parts.
    const b = opts.fetched?.get(p) ?? (await imageBytes(p, n, { signal: opts.signal, maxBytes: Math.min(MAX_IMAGE_BYTES, left) }));
    checkImagePixels(b, n);
    opts.fetched?.set(p, b);
    left -= b.length;
    images.push(b);
  }
  return visionPrompt(projector, text, images);
}
