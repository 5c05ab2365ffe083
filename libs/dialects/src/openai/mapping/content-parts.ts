import { InvalidRequestError } from '../../../../engine/src/core/errors';
import { CoreContentPart } from '../../../../engine/src/core/generation-request';

/**
 * Chat-completions content parts → core parts. Shapes follow OpenAI's:
 *   {type: "text", text}
 *   {type: "image_url", image_url: {url, detail?}}      url: http(s) or data:image/...;base64
 *   {type: "file", file: {file_data, filename?}}        file_data: a PDF as data:application/pdf;base64 (or bare base64)
 *   {type: "video_url", video_url: {url}}               url: http(s) or data:video/...;base64
 *   {type: "video", video: url | {url} | {data}}        llama.cpp-style video part
 *   {type: "input_audio", input_audio: {data, format}}
 * Media reach the engine as they came; it refuses them for a model without a vision projector.
 */
export function toCorePart(p: unknown, i: number, j: number): CoreContentPart {
  const at = `messages[${i}].content[${j}]`;
  const bad = (why: string): never => {
    throw new InvalidRequestError(`cannot parse request: ${at}${why}`);
  };
  if (!p || typeof p !== 'object' || Array.isArray(p)) bad(' must be an object with a type');
  const part = p as Record<string, unknown>;
  switch (part.type) {
    case 'text':
      if (typeof part.text !== 'string') bad('.text must be a string');
      return { type: 'text', text: part.text as string };
    case 'image_url':
      return { type: 'media', kind: 'image', ...urlOf(part.image_url, 'image', `.image_url`, bad) };
    case 'video_url':
      return { type: 'media', kind: 'video', ...urlOf(part.video_url, 'video', `.video_url`, bad) };
    case 'video': {
      const v = part.video as Record<string, unknown> | string | undefined;
      if (v && typeof v === 'object' && typeof v.data === 'string') return { type: 'media', kind: 'video', data: v.data };
      return { type: 'media', kind: 'video', ...urlOf(v, 'video', '.video', bad) };
    }
    case 'file':
      return { type: 'media', kind: 'file', ...fileOf(part.file, bad) };
    case 'input_audio': {
      const a = part.input_audio as { data?: unknown; format?: unknown } | undefined;
      if (typeof a?.data !== 'string' || typeof a.format !== 'string') bad('.input_audio must be {data, format}');
      return { type: 'media', kind: 'audio', data: a!.data as string, mime: `audio/${a!.format}` };
    }
    default:
      return bad('.type must be one of text, image_url, file, video_url, video');
  }
}

/** {url} or a bare string: an http(s) URL or a base64 data URL of the right kind. */
function urlOf(v: unknown, kind: 'image' | 'video', field: string, bad: (why: string) => never): { url?: string; data?: string; mime?: string } {
  const url = typeof v === 'string' ? v : v && typeof v === 'object' ? (v as { url?: unknown }).url : undefined;
  if (typeof url !== 'string' || url.length === 0) return bad(`${field}.url must be a string`);
  if (/^https?:\/\//i.test(url)) return { url };
  const data = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (!data) return bad(`${field}.url must be an http(s) URL or a data:${kind}/...;base64 URL`);
  // An animated GIF is a video too, under its own type.
  const fits = data[1].startsWith(`${kind}/`) || (kind === 'video' && data[1] === 'image/gif');
  if (!fits) return bad(`${field}.url is a data URL of ${data[1]}; expected ${kind}/*`);
  if (!isBase64(data[2])) return bad(`${field}.url data is not base64`);
  return { data: data[2], mime: data[1] };
}

function fileOf(v: unknown, bad: (why: string) => never): { data: string; mime: string; name?: string } {
  const f = v as { file_data?: unknown; file_id?: unknown; filename?: unknown } | undefined;
  if (!f || typeof f !== 'object') return bad('.file must be an object with file_data');
  if (f.file_data === undefined && typeof f.file_id === 'string') return bad('.file.file_id is not supported (this server stores no files); send file_data');
  if (typeof f.file_data !== 'string' || f.file_data.length === 0) return bad('.file.file_data must be a string');
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(f.file_data);
  const [mime, data] = m ? [m[1], m[2]] : ['application/pdf', f.file_data];
  if (mime !== 'application/pdf') return bad(`.file.file_data is ${mime}; file parts take a PDF (application/pdf)`);
  if (!isBase64(data)) return bad('.file.file_data is not base64');
  return { data, mime, ...(typeof f.filename === 'string' && f.filename ? { name: f.filename } : {}) };
}

function isBase64(s: string): boolean {
  return s.length > 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(s.replace(/\s+/g, ''));
}
