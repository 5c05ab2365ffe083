import { FastifyReply } from 'fastify';
import { MediaTally } from '../../../engine/src/media/media-plan';

/**
 * `X-Svc-Media` on every generation route whose prompt's pictures were thinned, as
 * `images=<kept>/<received>; video_frames=<kept>/<received>` (the kinds that were thinned).
 * A header, because a stream's first frame goes out before any body field could say it.
 */
export function setMediaHeader(reply: FastifyReply, tally: MediaTally | undefined): void {
  if (tally) reply.header('X-Svc-Media', mediaHeaderValue(tally));
}

export function mediaHeaderValue(t: MediaTally): string {
  const parts: string[] = [];
  if (t.images) parts.push(`images=${t.images.kept}/${t.images.received}`);
  if (t.video_frames) parts.push(`video_frames=${t.video_frames.kept}/${t.video_frames.received}`);
  return parts.join('; ');
}
