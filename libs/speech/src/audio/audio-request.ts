import { FastifyRequest } from 'fastify';
import { EngineError, InvalidRequestError } from '../../../engine/src/core/errors';
import { RESPONSE_FORMATS, ResponseFormat } from '../rendering/transcript-formats';
import { Transcriber } from '../transcriber';
import { inspectWav, NotWavError } from './wav';
import { MAX_AUDIO_SECONDS, MAX_PROMPT_CHARS } from './limits';

/** An audio request, read and checked: everything the transcriber and the renderer need. */
export interface AudioRequest {
  task: 'transcribe' | 'translate';
  /** The WAV file, decoded by the speech addon off the JS thread. */
  wav: Uint8Array;
  seconds: number;
  language?: string;
  prompt?: string;
  format: ResponseFormat;
}

/**
 * The request as OpenAI's clients send it: multipart/form-data with `file` and the options as
 * fields; or, for curl and scripts, the WAV itself as the body (audio/wav, application/octet-stream)
 * with the options in the query string.
 */
export async function readAudioRequest(req: FastifyRequest, task: AudioRequest['task'], t: Transcriber): Promise<AudioRequest> {
  if (!t.enabled) throw new InvalidRequestError('speech-to-text is off: start the server with -whisper');
  // The multipart boundary is case-sensitive (browsers send ----WebKitFormBoundaryAbC...): only the type is compared in lower case.
  const contentType = String(req.headers['content-type'] ?? '');
  const type = contentType.toLowerCase();
  const body = Buffer.isBuffer(req.body) ? req.body : undefined;
  let fields: Map<string, string[]>;
  let file: Buffer | undefined;
  if (type.startsWith('multipart/form-data')) {
    if (!body) throw new InvalidRequestError('the multipart body could not be read');
    let form: FormData;
    try {
      form = await new Response(body, { headers: { 'content-type': multipartType(contentType) } }).formData();
    } catch (err) {
      throw new InvalidRequestError(`malformed multipart body: ${(err as Error).message}`);
    }
    fields = new Map();
    for (const [k, v] of form.entries()) {
      if (k === 'file') {
        if (typeof v !== 'string') file = Buffer.from(await v.arrayBuffer());
        continue;
      }
      if (typeof v === 'string') addField(fields, k, v);
    }
  } else if (body && !type.startsWith('application/json')) {
    file = body;
    fields = new Map();
    for (const [k, v] of new URL(req.url, 'http://x').searchParams) {
      // One value each, as on every route's query (a list's name ends in []).
      if (fields.has(k) && !k.endsWith('[]') && k !== 'timestamp_granularities') throw new InvalidRequestError(`cannot parse request: the query parameter ${k} is given more than once`);
      addField(fields, k, v);
    }
  } else {
    throw new InvalidRequestError('send the audio as multipart/form-data with a file field (as OpenAI clients do), or as a WAV body');
  }
  if (!file || file.length === 0) throw new InvalidRequestError('file is required');
  const one = (k: string) => fields.get(k)?.[0];
  const format = (one('response_format') ?? 'json') as ResponseFormat;
  if (!RESPONSE_FORMATS.includes(format)) throw new InvalidRequestError(`response_format must be one of ${RESPONSE_FORMATS.join(', ')}, got ${JSON.stringify(format)}`);
  const temperature = one('temperature');
  // Decoding is greedy, without the fallback to sampling: the only temperature there is.
  if (temperature !== undefined && temperature.trim() !== '' && Number(temperature) !== 0) throw new InvalidRequestError(`temperature must be 0 (this server transcribes greedily), got ${temperature}`);
  const granularities = [...(fields.get('timestamp_granularities[]') ?? []), ...(fields.get('timestamp_granularities') ?? [])];
  // Segments carry their start and end; word timestamps are not offered (the spec refuses them).
  const bad = granularities.find((g) => g !== 'segment');
  if (bad !== undefined) throw new InvalidRequestError(bad === 'word' ? 'timestamp_granularities word is not supported: segments carry start and end times (segment, with verbose_json)' : `timestamp_granularities holds ${JSON.stringify(bad)}; it takes segment`);
  if (granularities.length > 0 && format !== 'verbose_json') throw new InvalidRequestError('timestamp_granularities needs response_format verbose_json');
  // Translations go into English from whatever is spoken: OpenAI's route takes no language.
  const language = task === 'transcribe' ? one('language')?.trim().toLowerCase() || undefined : undefined;
  if (language !== undefined && language !== 'auto' && !t.knowsLanguage(language)) throw new InvalidRequestError(`language ${JSON.stringify(language)} is not one whisper knows (ISO 639-1, e.g. en, de, ja)`);
  let info;
  try {
    info = inspectWav(file);
  } catch (err) {
    if (err instanceof NotWavError) throw new EngineError(err.message, 415);
    throw new InvalidRequestError((err as Error).message);
  }
  if (info.seconds === 0) throw new InvalidRequestError('the audio is empty');
  if (info.seconds > MAX_AUDIO_SECONDS) throw new InvalidRequestError(`the audio is ${Math.round(info.seconds)} s long; one request transcribes at most ${MAX_AUDIO_SECONDS} s`);
  const prompt = one('prompt')?.slice(-MAX_PROMPT_CHARS) || undefined;
  return { task, wav: file, seconds: info.seconds, language, prompt, format };
}

/**
 * The multipart type as undici's parser reads it: the boundary's value exactly as sent (it is
 * case-sensitive: browsers send ----WebKitFormBoundaryAbC...), the parameter's name in lower
 * case (undici does not find `Boundary=`).
 */
function multipartType(header: string): string {
  const m = /;\s*boundary\s*=\s*(?:"([^"]*)"|([^;\s]+))/i.exec(header);
  return m ? `multipart/form-data; boundary=${m[1] ?? m[2]}` : header;
}

/** Appends in place: copying the list per value made a form of 60,000 fields take 20 s (quadratic) on the event loop. */
function addField(fields: Map<string, string[]>, k: string, v: string): void {
  const list = fields.get(k);
  if (list) list.push(v);
  else fields.set(k, [v]);
}
