import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A PDF written by hand: one page per entry, holding that text in Helvetica (a line per "\n"; the
 * page grows to hold them, since pdftotext leaves out text past its edges), or (null) a page with
 * a filled square and no text layer, as a scanned page reads to pdftotext.
 */
export function pdf(pages: Array<string | null>): Buffer {
  const objs: string[] = ['<< /Type /Catalog /Pages 2 0 R >>', ''];
  const kids: string[] = [];
  objs.push('<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>'); // object 3
  for (const text of pages) {
    const lines = (text ?? '').split('\n');
    const width = Math.max(300, 40 + 8 * Math.max(...lines.map((l) => l.length)));
    const height = Math.max(200, 140 + 16 * (lines.length - 1));
    const shown = lines.map((l) => `(${l.replace(/[()\\]/g, (c) => `\\${c}`)}) Tj`).join(' T* ');
    const stream = text === null ? '0 0 1 rg 50 50 100 100 re f' : `BT /F1 14 Tf 16 TL 20 ${height - 100} Td ${shown} ET`;
    objs.push(`<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`);
    const contents = objs.length;
    objs.push(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 ${width} ${height}] /Contents ${contents} 0 R /Resources << /Font << /F1 3 0 R >> >> >>`);
    kids.push(`${objs.length} 0 R`);
  }
  objs[1] = `<< /Type /Pages /Kids [${kids.join(' ')}] /Count ${pages.length} >>`;
  let out = '%PDF-1.4\n';
  const offsets: number[] = [];
  objs.forEach((o, i) => {
    offsets.push(Buffer.byteLength(out, 'latin1'));
    out += `${i + 1} 0 obj\n${o}\nendobj\n`;
  });
  const xref = Buffer.byteLength(out, 'latin1');
  out += `xref\n0 ${objs.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`;
  out += `trailer\n<< /Size ${objs.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

/** A test-pattern video made by ffmpeg (the same program the server reads videos with). */
export function video(
  seconds: number,
  opts: {
    size?: string;
    format?: 'mp4' | 'webm' | 'mov' | 'gif';
    audioOnly?: boolean;
    /** Frames between key frames (ffmpeg's -g). */
    gop?: number;
    /** A webm written as a live recording: no duration in its header (browsers' MediaRecorder). */
    live?: boolean;
    /** A plain grey picture (cheap at any size) instead of the moving test pattern. */
    plain?: boolean;
    /** An audio track this long beside the video. */
    audioSeconds?: number;
  } = {},
): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'svc-test-video-'));
  try {
    const format = opts.format ?? 'mp4';
    const file = join(dir, `v.${format}`);
    const size = opts.size ?? '64x48';
    const picture = opts.plain ? `color=c=gray:s=${size}:d=${seconds}:r=1` : `testsrc=duration=${seconds}:size=${size}:rate=5`;
    const input = opts.audioOnly ? ['-f', 'lavfi', '-i', `sine=duration=${seconds}`] : ['-f', 'lavfi', '-i', picture];
    const audio = opts.audioSeconds ? ['-f', 'lavfi', '-i', `sine=duration=${opts.audioSeconds}`] : [];
    const codec = opts.audioOnly || format === 'gif' ? [] : opts.plain ? ['-c:v', 'png'] : format === 'webm' ? ['-c:v', 'libvpx', '-pix_fmt', 'yuv420p'] : ['-c:v', 'mpeg4', '-pix_fmt', 'yuv420p'];
    const extra = [...(opts.gop ? ['-g', String(opts.gop)] : []), ...(opts.live ? ['-live', '1'] : [])];
    execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...input, ...audio, ...codec, ...extra, file]);
    return readFileSync(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
