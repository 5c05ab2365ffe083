import { InvalidRequestError } from '../core/errors';
import { runMediaTool } from './media-tools';

/** Pages of one PDF that are read; the rest are left out, and the text says so. */
export const MAX_PDF_PAGES = 100;
/** Text one PDF may give (UTF-8 bytes): past the context of any model svc runs on a laptop. */
const MAX_PDF_TEXT = 16 * 1024 * 1024;
/** A page drawn for a projector: its longer side in pixels. */
const PAGE_SIDE = 1024;

/** The text of each page, in order (an empty string for a page with no text layer, such as a scan). */
export async function pdfPageTexts(bytes: Buffer, what: string, signal?: AbortSignal): Promise<{ pages: string[]; more: boolean }> {
  if (bytes.subarray(0, 1024).indexOf('%PDF-') < 0) throw new InvalidRequestError(`${what} is not a PDF (no %PDF- header)`);
  const out = await runMediaTool('pdftotext', {
    args: ['-enc', 'UTF-8', '-l', String(MAX_PDF_PAGES + 1), '-', '-'],
    input: bytes,
    maxOutput: MAX_PDF_TEXT,
    what,
    signal,
  }).catch((err: Error) => {
    // poppler's words for a document without pages ("Wrong page range given: the first page (1) can not be after the last page (0)").
    if (/can not be after the last page \(0\)/.test(err.message)) throw new InvalidRequestError(`${what} has no pages`);
    throw err;
  });
  // pdftotext ends every page with a form feed.
  const pages = out.toString('utf8').split('\f');
  if (pages[pages.length - 1] === '') pages.pop();
  const more = pages.length > MAX_PDF_PAGES;
  return { pages: pages.slice(0, MAX_PDF_PAGES).map((p) => p.trim()), more };
}

/** One page drawn as a PNG, for a model that reads images (a page with no text layer). */
export async function pdfPageImage(bytes: Buffer, page: number, what: string, signal?: AbortSignal): Promise<Buffer> {
  return runMediaTool('pdftoppm', {
    args: ['-q', '-f', String(page), '-l', String(page), '-png', '-scale-to', String(PAGE_SIDE), '-singlefile', '-'],
    input: bytes,
    maxOutput: 32 * 1024 * 1024,
    what: `${what} page ${page}`,
    signal,
  });
}
