import { deflateSync } from 'node:zlib';
import { WhisperResult, WhisperSegment } from '../whisper-addon';

export const RESPONSE_FORMATS = ['json', 'text', 'srt', 'verbose_json', 'vtt'] as const;
export type ResponseFormat = (typeof RESPONSE_FORMATS)[number];

export interface Rendered {
  contentType: string;
  body: string | Record<string, unknown>;
}

export interface TranscriptMeta {
  task: 'transcribe' | 'translate';
  /** The language's English name ("english"). */
  languageName: string;
  /** Seconds of audio. */
  seconds: number;
}

/** A transcript in the response format asked for, as OpenAI's audio routes answer. */
export function renderTranscript(result: WhisperResult, format: ResponseFormat, m: TranscriptMeta): Rendered {
  const r = withinAudio(result, m.seconds);
  const text = r.segments.map((s) => s.text).join('').trim();
  switch (format) {
    case 'text':
      return { contentType: 'text/plain; charset=utf-8', body: `${text}\n` };
    case 'srt':
      return { contentType: 'text/plain; charset=utf-8', body: r.segments.map((s, i) => `${i + 1}\n${clock(s.start, ',')} --> ${clock(s.end, ',')}\n${s.text.trim()}\n`).join('\n') };
    case 'vtt':
      return { contentType: 'text/vtt; charset=utf-8', body: `WEBVTT\n\n${r.segments.map((s) => `${clock(s.start, '.')} --> ${clock(s.end, '.')}\n${s.text.trim()}\n`).join('\n')}` };
    case 'verbose_json':
      return {
        contentType: 'application/json; charset=utf-8',
        body: {
          task: m.task,
          language: m.languageName,
          duration: round(m.seconds),
          text,
          segments: r.segments.map(segmentJson),
          usage: usage(m.seconds),
        },
      };
    default:
      return { contentType: 'application/json; charset=utf-8', body: { text, usage: usage(m.seconds) } };
  }
}

/**
 * Times inside the audio: whisper.cpp reads a segment's times from the timestamp tokens the
 * model chose, and a model that chooses badly (a random-weight one did) gave a start 1000 s
 * before the audio began.
 */
function withinAudio(r: WhisperResult, seconds: number): WhisperResult {
  const clamp = (t: number) => Math.min(seconds, Math.max(0, t));
  return {
    ...r,
    segments: r.segments.map((s) => ({ ...s, start: clamp(s.start), end: clamp(s.end) })),
  };
}

/** OpenAI bills audio by the second; its usage object says how many. */
function usage(seconds: number): { type: 'duration'; seconds: number } {
  return { type: 'duration', seconds: Math.ceil(seconds) };
}

function segmentJson(s: WhisperSegment, id: number): Record<string, unknown> {
  const words = s.tokens.filter((t) => !t.special);
  const avg = words.length ? words.reduce((a, t) => a + t.logprob, 0) / words.length : 0;
  const bytes = Buffer.from(s.text, 'utf8');
  return {
    id,
    // The 30 s window the segment came from, in mel frames (100 a second), as OpenAI counts.
    seek: Math.floor(s.start / 30) * 3000,
    start: round(s.start),
    end: round(s.end),
    text: s.text,
    tokens: words.map((t) => t.id),
    temperature: 0,
    avg_logprob: avg,
    compression_ratio: bytes.length ? bytes.length / deflateSync(bytes).length : 0,
    no_speech_prob: s.noSpeechProb,
  };
}

/** hh:mm:ss,mmm (SRT) or hh:mm:ss.mmm (WebVTT). */
export function clock(seconds: number, sep: ',' | '.'): string {
  const ms = Math.round(seconds * 1000);
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}${sep}${pad(ms % 1000, 3)}`;
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
