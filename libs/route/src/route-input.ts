import { InvalidRequestError } from '../../engine/src/core/errors';
import { CoreContentPart } from '../../engine/src/core/generation-request';
import { planMedia } from '../../engine/src/media/media-plan';
import { mediaSignal } from '../../engine/src/media/media-tools';
import { mediaPart } from '../../dialects/src/messages/mapping/messages-request.mapper';
import { toCorePart } from '../../dialects/src/openai/mapping/content-parts';
import { partToCore } from '../../dialects/src/responses/mapping/input-items.mapper';
import { checkMessages, joinTexts } from '../../dialects/src/shared/to-core';
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

/** Parts holding a document (a PDF, or the messages dialect's plain-text one), each read by its own dialect's mapper. */
const DOCUMENT_PARTS: Record<string, (p: Record<string, unknown>, at: string, i: number, j: number) => CoreContentPart> = {
  file: (p, _at, i, j) => toCorePart(p, i, j),
  document: (p, at) => mediaPart(p, at),
  input_file: (p, at) => partToCore(p, at),
};

/** The request's text and pictures; 400 for neither or both of messages and text, and for what cannot be read. */
export async function routeInput(dto: RouteRequestDto, signal?: AbortSignal): Promise<RouteInput> {
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
  const texts = await messageTexts(msgs, read.map((r) => r.parts), signal);
  const pictures = read.reduce((n, r) => n + r.pictures, 0);
  const lastUser = msgs.map((m, i) => (m.role === 'user' && texts[i].trim() ? i : -1)).filter((i) => i >= 0).pop();
  const lastAny = texts.map((t, i) => (t.trim() ? i : -1)).filter((i) => i >= 0).pop();
  const at = lastUser ?? lastAny;
  // A picture alone is routed by its attachment; nothing at all cannot be classified.
  if (at === undefined && Math.max(asked, pictures) === 0) throw new InvalidRequestError('messages hold no text');
  return { text: at === undefined ? '' : texts[at], chars: texts.reduce((n, t) => n + characters(t), 0), messages: msgs.length, pictures: Math.max(asked, pictures) };
}

/** A message's text and document parts, and its pictures (parts, or the local runner's `images`). */
function messageParts(m: Record<string, unknown>, i: number): { parts: CoreContentPart[]; pictures: number } {
  const images = m.images;
  if (images !== undefined && images !== null && !Array.isArray(images)) throw new InvalidRequestError(`messages[${i}].images must be an array`);
  let pictures = Array.isArray(images) ? images.length : 0;
  const c = m.content;
  if (c === undefined || c === null) return { parts: [], pictures };
  if (typeof c === 'string') return { parts: [{ type: 'text', text: c }], pictures };
  if (!Array.isArray(c)) throw new InvalidRequestError(`messages[${i}].content must be a string or an array of content parts`);
  const parts: CoreContentPart[] = [];
  c.forEach((p: unknown, j) => {
    if (!p || typeof p !== 'object' || Array.isArray(p)) throw new InvalidRequestError(`messages[${i}].content[${j}] must be an object with a type`);
    const part = p as { type?: unknown; text?: unknown };
    if (typeof part.text === 'string' && (part.type === 'text' || part.type === 'input_text')) parts.push({ type: 'text', text: part.text });
    else if (typeof part.type === 'string' && PICTURE_PARTS.has(part.type)) pictures++;
    else if (typeof part.type === 'string' && Object.hasOwn(DOCUMENT_PARTS, part.type)) parts.push(DOCUMENT_PARTS[part.type](p as Record<string, unknown>, `messages[${i}].content[${j}]`, i, j));
    // Other parts (audio) do not steer the route.
  });
  return { parts, pictures };
}

/**
 * Each message's text, its parts joined as chat joins them. A PDF counts as the text chat reads
 * of it (planMedia: pdftotext in its own process, under chat's limits on files and time; a page
 * without text is its note, as for a model without a projector), so length and fit see it.
 */
async function messageTexts(msgs: Array<Record<string, unknown>>, parts: CoreContentPart[][], signal?: AbortSignal): Promise<string[]> {
  const textOf = (content: CoreContentPart[]): string => joinTexts(content.flatMap((p) => (p.type === 'text' ? [p.text] : [])));
  if (!parts.some((ps) => ps.some((p) => p.type === 'media'))) return parts.map(textOf);
  const plan = await planMedia(
    parts.map((content, i) => ({ role: msgs[i].role as string, content })),
    { vision: false, signal: mediaSignal(signal) },
  );
  return plan.select(plan.count).messages.map((m) => (typeof m.content === 'string' ? m.content : textOf(m.content ?? [])));
}

/** Characters as a reader counts them (code points): an emoji is one, not two UTF-16 units. */
function characters(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}
