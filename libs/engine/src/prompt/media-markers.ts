import { InvalidRequestError } from '../core/errors';
import { CoreMessage } from '../core/generation-request';
import { CoreMediaPart } from '../media/media-bytes';

/** What a projector-equipped model cannot read (PDFs and videos became text and frames before: media-plan). */
const UNREAD = 'audio parts are not read by this model: its projector reads images only';

/**
 * Each image part becomes a text part holding the projector's marker, where the image sits (as
 * llama-server replaces image_url parts); the images come back in marker order, which is the
 * order the template writes the messages' text in. A caller's text holding the marker itself
 * would shift every image after it, so it is refused.
 */
export function withMediaMarkers(messages: CoreMessage[], marker: string): { messages: CoreMessage[]; media: CoreMediaPart[] } {
  const media: CoreMediaPart[] = [];
  const out = messages.map((m, i) => {
    if (typeof m.content === 'string' && m.content.includes(marker)) throw markerInText(marker, i);
    // Earlier calls' arguments and names reach the prompt too (mtmd then counted more markers than images).
    if (m.tool_calls?.some((c) => `${c.function.name}${c.function.arguments}`.includes(marker))) throw markerInText(marker, i);
    if (m.reasoning_content?.includes(marker)) throw markerInText(marker, i);
    if (!Array.isArray(m.content) || !m.content.some((p) => p.type === 'media')) {
      if (Array.isArray(m.content) && m.content.some((p) => p.type === 'text' && p.text.includes(marker))) throw markerInText(marker, i);
      return m;
    }
    const content = m.content.map((p) => {
      if (p.type === 'text') {
        if (p.text.includes(marker)) throw markerInText(marker, i);
        return p;
      }
      if (p.kind !== 'image') throw new InvalidRequestError(UNREAD);
      media.push(p);
      return { type: 'text' as const, text: marker };
    });
    return { ...m, content };
  });
  return { messages: out, media };
}

function markerInText(marker: string, i: number): InvalidRequestError {
  return new InvalidRequestError(`messages[${i}] holds the text ${marker}, which marks where an image goes on this model: leave it out`);
}
