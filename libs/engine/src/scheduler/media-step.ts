import { NativeContext } from '../backend/native-addon';
import { InvalidRequestError, KvFullError } from '../core/errors';
import { Sequence } from './sequence';

/**
 * Writes the images running prompts have reached into their sequences (the projector encodes
 * each, the context decodes its embeddings), one at a time. Called inside the scheduler's KV
 * section between steps: no decode runs on the context meanwhile. A request whose image cannot
 * be written fails alone; the others go on.
 */
export async function writePendingMedia(
  ctx: NativeContext,
  active: Sequence[],
  relieve: () => Promise<boolean>,
  drop: (s: Sequence, err: Error) => void,
): Promise<void> {
  for (const s of [...active]) {
    const span = s.pendingMedia;
    if (!span || s.cancelled || s.finished) continue;
    let failure: Error | undefined;
    try {
      let r = await ctx.evalMedia(s.spec.media!.prompt, span.chunk, s.seq, s.nPast);
      // KV full (nothing was written that stays): free what can be freed and try again.
      while (r.status === 1 && (await relieve())) {
        // A write split over several decodes may have left a part: the retry starts clean.
        ctx.seqRemove(s.seq, s.nPast, -1);
        r = await ctx.evalMedia(s.spec.media!.prompt, span.chunk, s.seq, s.nPast);
      }
      if (r.status === 1) failure = new KvFullError('an image needed more cells than were free');
      else if (r.status !== 0) failure = new Error(`the image could not be read into the model: ${r.error || `decode status ${r.status}`}`);
      else s.nPast = span.start + span.length;
    } catch (err) {
      // Refused before anything ran (an image larger than a micro-batch): the request's fault.
      failure = new InvalidRequestError((err as Error).message);
    }
    if (failure) {
      // Cells a partial write left behind go with the sequence's release.
      drop(s, failure);
    }
  }
}
