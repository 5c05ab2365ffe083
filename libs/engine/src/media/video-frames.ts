import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvalidRequestError } from '../core/errors';
import { runMediaTool } from './media-tools';

/** Frames read per second of video, before thinning: one a second reads a clip's scenes, not its motion. */
export const VIDEO_FPS = 1;
/** Frames one video gives at most; a longer video is sampled evenly over its whole length (thinned). */
export const MAX_FRAMES_PER_VIDEO = 16;
/** A frame's longer side is scaled down to this: projectors resize to ~900 px, and a 4K frame as PNG is 20 MB. */
const FRAME_SIDE = 1024;
/** Seconds between the frames read from which only key frames are decoded (encoders put one every few seconds). */
const SPARSE_SECONDS = 10;
const MAX_FRAME_BYTES = 8 * 1024 * 1024;

/**
 * Containers ffmpeg may open. Playlists (HLS, concat, ffconcat) are not among them: one names
 * other files or URLs, which a caller's video could make the server read.
 */
const CONTAINERS = 'mov,matroska,avi,mpeg,mpegts,gif,ogg,flv,asf';

export interface VideoFrames {
  /** PNG images, in time order. */
  frames: Buffer[];
  /** Frames the video holds at VIDEO_FPS: more than `frames.length` when it was thinned. */
  nominal: number;
}

/** Frames sampled evenly from a video (mp4, webm/mkv, avi, mpeg, ogg, flv, wmv, animated gif). */
export async function videoFrames(bytes: Buffer, what: string, signal?: AbortSignal, maxFrames = MAX_FRAMES_PER_VIDEO): Promise<VideoFrames> {
  // A file, not a pipe: mp4s often keep their index at the end, which a pipe cannot seek to.
  const dir = await mkdtemp(join(tmpdir(), 'svc-video-'));
  try {
    const file = join(dir, 'video');
    await writeFile(file, bytes);
    const open = ['-format_whitelist', CONTAINERS, '-protocol_whitelist', 'file'];
    const probe = await runMediaTool('ffprobe', {
      args: ['-v', 'error', ...open, '-show_entries', 'format=duration:stream=codec_type', '-of', 'json', file],
      maxOutput: 1 << 20,
      what,
      signal,
    });
    const info = parseProbe(probe);
    if (!info.hasVideo) throw new InvalidRequestError(`${what} has no video stream`);
    // Known length: N frames at even spacing; unknown (some live streams): the first ones at VIDEO_FPS.
    const nominal = info.duration ? Math.max(1, Math.ceil(info.duration * VIDEO_FPS)) : maxFrames;
    const n = Math.min(nominal, maxFrames);
    const rate = info.duration ? n / info.duration : VIDEO_FPS;
    const scale = `scale=w='min(${FRAME_SIDE},iw)':h='min(${FRAME_SIDE},ih)':force_original_aspect_ratio=decrease`;
    // Frames far apart: key frames alone are decoded (an hour of video decoded whole ran past the time limit).
    const sparse = info.duration !== undefined && info.duration / n >= SPARSE_SECONDS ? ['-skip_frame', 'nokey'] : [];
    const out = await runMediaTool('ffmpeg', {
      args: ['-nostdin', '-v', 'error', ...open, ...sparse, '-i', file, '-map', '0:v:0', '-vf', `fps=fps=${rate.toFixed(6)},${scale}`, '-frames:v', String(n), '-f', 'image2pipe', '-c:v', 'png', '-'],
      maxOutput: n * MAX_FRAME_BYTES,
      what,
      signal,
    });
    const frames = splitPngs(out);
    if (frames.length === 0) throw new InvalidRequestError(`${what} cannot be decoded: no frame could be read`);
    return { frames, nominal: info.duration ? nominal : frames.length };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function parseProbe(out: Buffer): { duration?: number; hasVideo: boolean } {
  const j = JSON.parse(out.toString('utf8') || '{}') as { format?: { duration?: string }; streams?: Array<{ codec_type?: string }> };
  const d = Number(j.format?.duration);
  return { duration: Number.isFinite(d) && d > 0 ? d : undefined, hasVideo: (j.streams ?? []).some((s) => s.codec_type === 'video') };
}

/** PNG files written back to back (ffmpeg's image2pipe): each ends with its IEND chunk. */
export function splitPngs(b: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let start = 0;
  while (start + 8 <= b.length) {
    let at = start + 8;
    let end = -1;
    while (at + 12 <= b.length) {
      const len = b.readUInt32BE(at);
      const type = b.toString('latin1', at + 4, at + 8);
      at += 12 + len;
      if (type === 'IEND') {
        end = at;
        break;
      }
    }
    if (end < 0 || end > b.length) break;
    out.push(b.subarray(start, end));
    start = end;
  }
  return out;
}
