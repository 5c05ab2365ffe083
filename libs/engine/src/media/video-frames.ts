import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvalidRequestError } from '../core/errors';
import { MAX_IMAGE_PIXELS } from './media-bytes';
import { mediaTurn, runTool, ToolRun } from './media-tools';

/** Frames read per second of video, before thinning: one a second reads a clip's scenes, not its motion. */
export const VIDEO_FPS = 1;
/** Frames one video gives at most; a longer video is sampled evenly over its whole length (thinned). */
export const MAX_FRAMES_PER_VIDEO = 16;
/** A frame's longer side is scaled down to this: projectors resize to ~900 px, and a 4K frame as PNG is 20 MB. */
const FRAME_SIDE = 1024;
const MAX_FRAME_BYTES = 8 * 1024 * 1024;
/**
 * Seconds between the frames read from which each frame is sought on its own (decoding from the
 * key frame before it) rather than the whole video decoded: an hour decoded whole ran past the
 * time limit, and key frames alone (skip_frame) gave one picture many times over.
 */
const SEEK_SECONDS = 10;

/**
 * Containers ffmpeg may open. Playlists (HLS, concat, ffconcat) are not among them: one names
 * other files or URLs, which a caller's video could make the server read.
 */
const CONTAINERS = 'mov,matroska,avi,mpeg,mpegts,gif,ogg,flv,asf';
const OPEN = ['-format_whitelist', CONTAINERS, '-protocol_whitelist', 'file'];

export interface VideoFrames {
  /** PNG images, in time order. */
  frames: Buffer[];
  /** Frames the video holds at VIDEO_FPS: more than `frames.length` when it was thinned. */
  nominal: number;
}

interface Probed {
  /** The video stream read (not a cover picture). */
  stream: number;
  width: number;
  height: number;
  /** Seconds of that stream; undefined when neither it nor its packets say. */
  duration?: number;
}

/** Frames sampled evenly from a video (mp4, webm/mkv, avi, mpeg, ogg, flv, wmv, animated gif). */
export async function videoFrames(bytes: Buffer, what: string, signal?: AbortSignal, maxFrames = MAX_FRAMES_PER_VIDEO): Promise<VideoFrames> {
  // One turn for the whole video: a video waiting for its turn holds no temporary file.
  const release = await mediaTurn(what, signal);
  // A file, not a pipe: mp4s often keep their index at the end, which a pipe cannot seek to.
  let dir: string;
  try {
    dir = await mkdtemp(join(tmpdir(), 'svc-video-'));
  } catch (err) {
    // The turn goes back: kept, every later video and PDF waited for it forever.
    release();
    throw err;
  }
  try {
    const file = join(dir, 'video');
    await writeFile(file, bytes);
    const run = (args: string[], maxOutput: number): Promise<Buffer> => runTool(args[0], { args: args.slice(1), maxOutput, what, signal, hide: [file, 'the video'] } satisfies ToolRun);
    const v = await probe(file, run, what);
    const nominal = v.duration ? Math.max(1, Math.ceil(v.duration * VIDEO_FPS)) : 1;
    const n = Math.min(nominal, maxFrames);
    const scale = `scale=w='min(${FRAME_SIDE},iw)':h='min(${FRAME_SIDE},ih)':force_original_aspect_ratio=decrease`;
    const pick = ['-map', `0:${v.stream}`];
    let frames: Buffer[];
    if (v.duration && v.duration / n >= SEEK_SECONDS) {
      frames = [];
      for (let i = 0; i < n; i++) {
        const at = ((i + 0.5) * v.duration) / n;
        const one = await run(['ffmpeg', '-nostdin', '-v', 'error', ...OPEN, '-ss', at.toFixed(3), '-i', file, ...pick, '-vf', scale, '-frames:v', '1', '-f', 'image2pipe', '-c:v', 'png', '-'], MAX_FRAME_BYTES);
        frames.push(...splitPngs(one));
      }
    } else {
      // Dense enough to decode whole: the fps filter takes the frame nearest each sample time.
      const rate = v.duration ? n / v.duration : VIDEO_FPS;
      const out = await run(['ffmpeg', '-nostdin', '-v', 'error', ...OPEN, '-i', file, ...pick, '-vf', `fps=fps=${rate.toFixed(6)},${scale}`, '-frames:v', String(n), '-f', 'image2pipe', '-c:v', 'png', '-'], n * MAX_FRAME_BYTES);
      frames = splitPngs(out);
    }
    if (frames.length === 0) throw new InvalidRequestError(`${what} cannot be decoded: no frame could be read`);
    return { frames, nominal: Math.max(nominal, frames.length) };
  } finally {
    release();
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * The first video stream that is not an attached picture, its size (refused past the pixels an
 * image may have: an 8000x8000 video of 424 KB took ffmpeg to 441 MiB) and its length: the
 * stream's own (a longer audio track is not the video's), else the container's, else its last
 * packet's time (a recording whose header says none, as browsers write webm).
 */
async function probe(file: string, run: (args: string[], maxOutput: number) => Promise<Buffer>, what: string): Promise<Probed> {
  const j = JSON.parse((await run(['ffprobe', '-v', 'error', ...OPEN, '-show_entries', 'format=duration:stream=index,codec_type,width,height,duration:stream_disposition=attached_pic', '-of', 'json', file], 1 << 20)).toString('utf8') || '{}') as {
    format?: { duration?: string };
    streams?: Array<{ index: number; codec_type?: string; width?: number; height?: number; duration?: string; disposition?: { attached_pic?: number } }>;
  };
  const s = (j.streams ?? []).find((x) => x.codec_type === 'video' && !x.disposition?.attached_pic);
  if (!s) throw new InvalidRequestError(`${what} has no video stream`);
  const width = s.width ?? 0;
  const height = s.height ?? 0;
  if (width * height > MAX_IMAGE_PIXELS) throw new InvalidRequestError(`${what} is ${width}x${height} pixels; videos are taken up to ${MAX_IMAGE_PIXELS} pixels a frame (4096x4096)`);
  let duration = seconds(s.duration) ?? seconds(j.format?.duration);
  if (duration === undefined) {
    const times = (await run(['ffprobe', '-v', 'error', ...OPEN, '-select_streams', String(s.index), '-show_entries', 'packet=pts_time', '-of', 'csv=p=0', file], 8 << 20)).toString('utf8');
    duration = times.split('\n').reduce<number | undefined>((max, t) => {
      const x = seconds(t);
      return x !== undefined && (max === undefined || x > max) ? x : max;
    }, undefined);
  }
  return { stream: s.index, width, height, duration };
}

function seconds(s: string | undefined): number | undefined {
  const d = Number(s);
  return s !== undefined && s !== '' && Number.isFinite(d) && d > 0 ? d : undefined;
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
