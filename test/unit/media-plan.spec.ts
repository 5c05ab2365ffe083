import { CoreContentPart, CoreMessage } from '../../libs/engine/src/core/generation-request';
import { planMedia } from '../../libs/engine/src/media/media-plan';
import { evenly, keptPictures, LOOSE, PictureSlot } from '../../libs/engine/src/media/media-thinning';
import { splitPngs, videoFrames } from '../../libs/engine/src/media/video-frames';
import { MAX_RUNNING_TOOLS, runMediaTool } from '../../libs/engine/src/media/media-tools';
import { mediaHeaderValue } from '../../libs/dialects/src/shared/media-header';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NativeProjector } from '../../libs/engine/src/backend/native-addon';
import { readVisionPrompt } from '../../libs/engine/src/media/vision-prompt';
import { png } from '../e2e/helpers/images';
import { pdf, video } from '../e2e/helpers/media';

const loose = (n: number): PictureSlot[] => Array.from({ length: n }, (_, index) => ({ group: LOOSE, index }));
const frames = (group: string, n: number): PictureSlot[] => Array.from({ length: n }, (_, index) => ({ group, index }));
const sorted = (s: Set<number>) => [...s].sort((a, b) => a - b);

describe('keptPictures', () => {
  it('keeps the latest 16 loose images, whatever the total allows', () => {
    expect(sorted(keptPictures(loose(20), 32))).toEqual([...Array(16).keys()].map((i) => i + 4));
  });

  it('a video keeps frames spread over its length', () => {
    expect(sorted(keptPictures(frames('video 1', 16), 4))).toEqual([2, 6, 10, 14]);
    expect(evenly(5, 5)).toEqual([0, 1, 2, 3, 4]);
    expect(evenly(30, 1)).toEqual([15]);
  });

  it('the largest group gives one up at a time: neither a video nor many images crowd the other out', () => {
    const slots = [...loose(10), ...frames('video 1', 16)];
    const kept = sorted(keptPictures(slots, 20));
    expect(kept.filter((i) => i < 10)).toHaveLength(10);
    expect(kept.filter((i) => i >= 10)).toHaveLength(10);
    const tight = sorted(keptPictures(slots, 6));
    expect(tight.filter((i) => i < 10)).toEqual([7, 8, 9]);
    expect(tight.filter((i) => i >= 10)).toHaveLength(3);
    expect(keptPictures(slots, 0).size).toBe(0);
  });
});

describe('planMedia', () => {
  const img = (): CoreContentPart => ({ type: 'media', kind: 'image', data: png(2, 2, () => [1, 2, 3]).toString('base64') });
  const textOf = (m: CoreMessage) => (m.content as CoreContentPart[]).map((p) => (p.type === 'text' ? p.text : `<${p.kind}>`)).join('|');

  it('17 images: the first is left out with a note, and the tally says 16 of 17', async () => {
    const plan = await planMedia([{ role: 'user', content: [...Array.from({ length: 17 }, img), { type: 'text', text: 'q' }] }], { vision: true });
    const sel = plan.select(32);
    expect(sel.kept).toBe(16);
    expect(sel.tally).toEqual({ images: { received: 17, kept: 16 } });
    expect(textOf(sel.messages[0])).toBe(['[image left out]', ...Array(16).fill('<image>'), 'q'].join('|'));
    expect(plan.select(32 + 100).tally).toEqual(sel.tally);
    const few = await planMedia([{ role: 'user', content: [img(), { type: 'text', text: 'q' }] }], { vision: true });
    expect(few.select(32).tally).toBeUndefined();
  });

  it('a PDF becomes its pages as text; a page without text is an image for a projector, a note without one', async () => {
    const file: CoreContentPart = { type: 'media', kind: 'file', data: pdf(['Alpha words', null]).toString('base64'), name: 'a.pdf' };
    const messages: CoreMessage[] = [{ role: 'system', content: 'be brief' }, { role: 'user', content: [file, { type: 'text', text: 'q' }] }];
    const text = (await planMedia(messages, { vision: false })).select(32);
    expect(text.messages[0]).toBe(messages[0]);
    expect(textOf(text.messages[1])).toBe('[PDF a.pdf, 2 pages]|\n[page 1]\nAlpha words|\n[page 2]\n(no text on this page)|q');
    const vision = await planMedia(messages, { vision: true });
    const sel = vision.select(32);
    expect(textOf(sel.messages[1])).toBe('[PDF a.pdf, 2 pages]|\n[page 1]\nAlpha words|\n[page 2]\n|<image>|q');
    const page = (sel.messages[1].content as CoreContentPart[])[3];
    expect(vision.made.get(page as never)?.label).toBe('file 1 page 2');
    expect((await vision.made.get(page as never)!.read()).subarray(1, 4).toString()).toBe('PNG');
  });

  it('a page without text is drawn only when read (a thinned-away page never is), once', async () => {
    // pdftoppm on the PATH through a shim that counts its runs.
    const bin = mkdtempSync(join(tmpdir(), 'svc-shim-'));
    const log = join(bin, 'runs');
    writeFileSync(join(bin, 'pdftoppm'), `#!/bin/sh\necho run >> ${log}\nexec ${execFileSync('sh', ['-c', 'command -v pdftoppm']).toString().trim()} "$@"\n`, { mode: 0o755 });
    const path = process.env.PATH;
    process.env.PATH = `${bin}:${path}`;
    try {
      const file: CoreContentPart = { type: 'media', kind: 'file', data: pdf(Array(20).fill(null)).toString('base64') };
      const plan = await planMedia([{ role: 'user', content: [file] }], { vision: true });
      // 16 pages of the request's PDFs are offered as pictures (the rest noted), 4 kept.
      expect(textOf(plan.select(32).messages[0])).toContain('[page 17]\n(no text on this page)');
      const sel = plan.select(4);
      expect(sel.tally).toEqual({ images: { received: 16, kept: 4 } });
      expect(existsSync(log)).toBe(false);
      const pages = (sel.messages[0].content as CoreContentPart[]).filter((p) => p.type === 'media');
      expect(pages).toHaveLength(4);
      expect(textOf(sel.messages[0])).toContain('[page 1]\n|(a page image left out)');
      await plan.made.get(pages[0] as never)!.read();
      await plan.made.get(pages[0] as never)!.read();
      expect(readFileSync(log, 'utf8')).toBe('run\n');
    } finally {
      process.env.PATH = path;
    }
  });

  it('after thinning, a refusal names the image by its number in the request', async () => {
    const bad: CoreContentPart = { type: 'media', kind: 'image', data: Buffer.from('not an image at all').toString('base64') };
    const parts = Array.from({ length: 17 }, img);
    parts[1] = bad;
    const plan = await planMedia([{ role: 'user', content: [...parts, { type: 'text', text: 'q' }] }], { vision: true });
    const sel = plan.select(32);
    const kept = (sel.messages[0].content as CoreContentPart[]).filter((p) => p.type === 'media') as never[];
    await expect(readVisionPrompt({} as NativeProjector, 'x', kept, { numbers: plan.numbers })).rejects.toThrow(/^image 2 cannot be decoded/);
  });

  it('a video on a model without a projector is left for the renderer to refuse', async () => {
    const part: CoreContentPart = { type: 'media', kind: 'video', data: 'AAAA' };
    const plan = await planMedia([{ role: 'user', content: [part] }], { vision: false });
    expect(plan.select(32).messages[0].content).toEqual([part]);
  });
});

describe('videoFrames', () => {
  it('one frame a second, at most 16 spread over a longer video', async () => {
    const short = await videoFrames(video(3), 'video 1');
    expect([short.frames.length, short.nominal]).toEqual([3, 3]);
    const long = await videoFrames(video(40, { size: '32x24' }), 'video 1');
    expect([long.frames.length, long.nominal]).toEqual([16, 40]);
    expect(long.frames.every((f) => f.subarray(1, 4).toString() === 'PNG')).toBe(true);
    // 16 frames over 200 s: key frames alone are decoded, and the frames still differ (the pattern's clock moves).
    const sparse = await videoFrames(video(200, { size: '160x120' }), 'video 1');
    expect([sparse.frames.length, sparse.nominal]).toEqual([16, 200]);
    expect(new Set(sparse.frames.map((f) => f.toString('base64'))).size).toBe(16);
  });

  it('frames far apart are each sought: a video with one key frame still gives 16 different pictures', async () => {
    // Key frames alone (skip_frame) gave frame 0 eleven times over.
    const v = await videoFrames(video(180, { size: '160x120', gop: 100000 }), 'video 1');
    expect([v.frames.length, v.nominal]).toEqual([16, 180]);
    expect(new Set(v.frames.map((f) => f.toString('base64'))).size).toBe(16);
  });

  it('a recording whose header has no length is measured by its packets: frames spread over all of it', async () => {
    const v = await videoFrames(video(40, { format: 'webm', live: true }), 'video 1');
    expect([v.frames.length, v.nominal]).toEqual([16, 40]);
  });

  it('the length of the video stream counts, not that of a longer audio track (nothing was thinned)', async () => {
    const v = await videoFrames(video(2, { audioSeconds: 10 }), 'video 1');
    expect([v.frames.length, v.nominal]).toEqual([2, 2]);
  });

  it('refuses a video past the pixels an image may have, and names no temporary path', async () => {
    await expect(videoFrames(video(1, { size: '4200x4100', plain: true, format: 'mov' }), 'video 2')).rejects.toThrow('video 2 is 4200x4100 pixels; videos are taken up to 16777216 pixels a frame (4096x4096)');
    const playlist = Buffer.from('#EXTM3U\n#EXTINF:1,\nfile:///etc/hostname\n');
    const err = (await videoFrames(playlist, 'video 1').catch((e: Error) => e)) as Error;
    expect(err.message).toMatch(/^video 1 cannot be decoded: /);
    expect(err.message).not.toContain(tmpdir());
  });

  it('splitPngs splits PNGs written back to back, and drops a cut-off tail', () => {
    const a = png(2, 2, () => [0, 0, 0]);
    const b = png(3, 1, () => [9, 9, 9]);
    expect(splitPngs(Buffer.concat([a, b]))).toEqual([a, b]);
    expect(splitPngs(Buffer.concat([a, b.subarray(0, 20)]))).toEqual([a]);
  });
});

it('X-Svc-Media names what was thinned, kept over received', () => {
  expect(mediaHeaderValue({ images: { received: 20, kept: 15 } })).toBe('images=15/20');
  expect(mediaHeaderValue({ images: { received: 3, kept: 2 }, video_frames: { received: 30, kept: 12 } })).toBe('images=2/3; video_frames=12/30');
});

describe('runMediaTool', () => {
  const sleep = (s: number, signal?: AbortSignal) => runMediaTool('sh', { args: ['-c', `sleep ${s}; echo done`], maxOutput: 100, what: 'video 1', signal });

  it('runs at most MAX_RUNNING_TOOLS at once; one whose request is gone while waiting leaves the queue', async () => {
    const t0 = Date.now();
    const busy = Array.from({ length: MAX_RUNNING_TOOLS }, () => sleep(0.6));
    const gone = new AbortController();
    const waiting = sleep(0, gone.signal);
    const next = sleep(0);
    gone.abort();
    await expect(waiting).rejects.toThrow('video 1: the request was cancelled');
    expect(Date.now() - t0).toBeLessThan(400);
    expect((await next).toString()).toBe('done\n');
    // It ran only once a place was free.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(550);
    await Promise.all(busy);
  });

  it('a program that fails, writes too much or is missing is a 400 naming the part', async () => {
    await expect(runMediaTool('sh', { args: ['-c', 'echo "bad header" >&2; exit 3'], maxOutput: 100, what: 'file 2' })).rejects.toThrow('file 2 cannot be decoded: bad header');
    await expect(runMediaTool('sh', { args: ['-c', 'head -c 5000 /dev/zero'], maxOutput: 100, what: 'file 2' })).rejects.toThrow('file 2: sh wrote more than 100 bytes');
    await expect(runMediaTool('svc-no-such-tool', { args: [], maxOutput: 100, what: 'video 3' })).rejects.toThrow('video 3 cannot be read here: svc-no-such-tool is not installed');
    await expect(runMediaTool('sh', { args: ['-c', 'sleep 5'], maxOutput: 100, what: 'video 1', timeoutMs: 200 })).rejects.toThrow('video 1: sh did not finish within 200 ms');
  });
});
