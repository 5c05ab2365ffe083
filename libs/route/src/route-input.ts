import { InvalidRequestError } from '../../engine/src/core/errors';
import { checkMessages } from '../../dialects/src/shared/to-core';
import { RouteRequestDto } from './protocol/route.dto';

/** What routing reads of a request: the text to classify, how long the conversation is, and its pictures. */
export interface RouteInput {
  /** The text the category is read from: the last user message's (else the last message with text). */
  text: string;
  /** Characters of every message's text together: what the chosen model would read. */
  chars: number;
  /** Messages in the conversation (a `text` request is one). */
  messages: number;
  /** Pictures attached: `images`, `has_image`, and picture parts in the messages. */
  pictures: number;
}

/** Content parts that a model reads through a vision projector (a video as its frames), in the dialects svc answers. */
const PICTURE_PARTS = new Set(['image_url', 'input_image', 'image', 'video_url', 'video']);

/** The request's text and pictures; 400 for neither or both of messages and text, and for what cannot be read. */
export function routeInput(dto: RouteRequestDto): RouteInput {
  const hasText = dto.text !== undefined && dto.text !== null;
  const hasMessages = dto.messages !== undefined && dto.messages !== null;
  if (hasText && hasMessages) throw new InvalidRequestError('send text or messages, not both');
  if (!hasText && !hasMessages) throw new InvalidRequestError('send text or messages');
  const asked = Math.max(dto.images ?? 0, dto.has_image ? 1 : 0);
  if (hasText) {
    const text = dto.text!;
    if (text.trim() === '') throw new InvalidRequestError('text is empty');
    return { text, chars: characters(text), messages: 1, pictures: asked };
  }
  const msgs = dto.messages!;
  checkMessages(msgs as Array<{ role?: unknown }>);
  const read = msgs.map((m, i) => messageParts(m, i));
  const texts = read.map((r) => r.text);
  const pictures = read.reduce((n, r) => n + r.pictures, 0);
  const lastUser = msgs.map((m, i) => (m.role === 'user' && texts[i].trim() ? i : -1)).filter((i) => i >= 0).pop();
  const lastAny = texts.map((t, i) => (t.trim() ? i : -1)).filter((i) => i >= 0).pop();
  const at = lastUser ?? lastAny;
  // A picture alone is routed by its attachment; nothing at all cannot be classified.
  if (at === undefined && Math.max(asked, pictures) === 0) throw new InvalidRequestError('messages hold no text');
  return { text: at === undefined ? '' : texts[at], chars: texts.reduce((n, t) => n + characters(t), 0), messages: msgs.length, pictures: Math.max(asked, pictures) };
}

/** A message's text (its text parts joined by newlines) and its pictures (parts, or the local runner's `images`). */
function messageParts(m: Record<string, unknown>, i: number): { text: string; pictures: number } {
  const images = m.images;
  if (images !== undefined && images !== null && !Array.isArray(images)) throw new InvalidRequestError(`messages[${i}].images must be an array`);
  let pictures = Array.isArray(images) ? images.length : 0;
  const c = m.content;
  if (c === undefined || c === null) return { text: '', pictures };
  if (typeof c === 'string') return { text: c, pictures };
  if (!Array.isArray(c)) throw new InvalidRequestError(`messages[${i}].content must be a string or an array of content parts`);
  const texts: string[] = [];
  c.forEach((p: unknown, j) => {
    if (!p || typeof p !== 'object' || Array.isArray(p)) throw new InvalidRequestError(`messages[${i}].content[${j}] must be an object with a type`);
    const part = p as { type?: unknown; text?: unknown };
    if (typeof part.text === 'string' && (part.type === 'text' || part.type === 'input_text')) texts.push(part.text);
    else if (typeof part.type === 'string' && PICTURE_PARTS.has(part.type)) pictures++;
    // Other parts (audio; files, read by any model as their text) do not steer the route.
  });
  return { text: texts.join('\n'), pictures };
}

/** Characters as a reader counts them (code points): an emoji is one, not two UTF-16 units. */
function characters(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}
