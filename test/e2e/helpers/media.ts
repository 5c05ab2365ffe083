import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A PDF written by hand: one page per entry, holding that text in Helvetica, or (null) a page
 * with a filled square and no text layer, as a scanned page reads to pdftotext.
 */
export function pdf(pages: Array<string | null>): Buffer {
  const objs: string[] = ['<< /Type /Catalog /Pages 2 0 R >>', ''];
  const kids: string[] = [];
  objs.push('<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>'); // object 3
  for (const text of pages) {
    const stream = text === null ? '0 0 1 rg 50 50 100 100 re f' : `BT /F1 14 Tf 20 100 Td (${text.replace(/[()\\]/g, (c) => `\\${c}`)}) Tj ET`;
    objs.push(`<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`);
    const contents = objs.length;
    objs.push(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] /Contents ${contents} 0 R /Resources << /Font << /F1 3 0 R >> >> >>`);
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
export function video(seconds: number, opts: { size?: string; format?: 'mp4' | 'webm'; audioOnly?: boolean } = {}): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'svc-test-video-'));
  try {
    const file = join(dir, `v.${opts.format ?? 'mp4'}`);
    const input = opts.audioOnly ? ['-f', 'lavfi', '-i', `sine=duration=${seconds}`] : ['-f', 'lavfi', '-i', `testsrc=duration=${seconds}:size=${opts.size ?? '64x48'}:rate=5`, '-pix_fmt', 'yuv420p'];
    const codec = opts.audioOnly ? [] : opts.format === 'webm' ? ['-c:v', 'libvpx'] : ['-c:v', 'mpeg4'];
    execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...input, ...codec, file]);
    return readFileSync(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
