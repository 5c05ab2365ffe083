import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * The contract with native/whisper (build/native/whisper/svc_whisper.node):
 * whisper.cpp with its own ggml, a separate addon from the engine's.
 */
export interface WhisperToken {
  id: number;
  text: string;
  p: number;
  logprob: number;
  /** Timestamp and control tokens (not words). */
  special: boolean;
}

export interface WhisperSegment {
  /** Seconds from the start of the audio. */
  start: number;
  end: number;
  text: string;
  noSpeechProb: number;
  tokens: WhisperToken[];
}

export interface WhisperResult {
  /** The language spoken (ISO 639-1), detected or as asked. */
  language: string;
  /** Milliseconds whisper_full ran. */
  ms: number;
  /** Seconds of audio transcribed. */
  seconds: number;
  segments: WhisperSegment[];
}

export interface WhisperOptions {
  /** ISO 639-1; '' or 'auto' detects it. */
  language?: string;
  /** Into English instead of the spoken language. */
  translate?: boolean;
  /** Text the decoder is primed with (spelling, vocabulary, the previous part). */
  prompt?: string;
  threads?: number;
  /** WAV bytes decoding to more than this many seconds are refused ("bad audio: ..."), before their samples are allocated. */
  maxSeconds?: number;
}

export interface WhisperModel {
  readonly info: { type: string; multilingual: boolean; nVocab: number; nMels: number; nAudioLayer: number; nTextLayer: number; nAudioState: number };
  /**
   * 16 kHz mono samples in [-1, 1], or a WAV file's bytes (decoded and resampled on the worker
   * thread, as whisper-cli does; bytes it cannot decode reject with "bad audio: <why>"). cancel()
   * makes the promise reject with "cancelled" at the next check.
   */
  transcribe(audio: Float32Array | Uint8Array, opts: WhisperOptions): { promise: Promise<WhisperResult>; cancel(): void };
  /** Frees the model once a transcription in flight is done. */
  dispose(): Promise<void>;
}

export interface WhisperAddon {
  version: string;
  systemInfo(): string;
  loadModel(path: string): Promise<WhisperModel>;
  /** whisper.cpp's id of an ISO 639-1 code (or full name), -1 when it has none. */
  languageId(code: string): number;
  /** whisper.cpp's English name of a language ("english"), '' when it has none. */
  languageName(code: string): string;
}

/** The speech addon built beside the engine's (scripts/build-native.mjs --addon whisper). */
export function loadWhisperAddon(): WhisperAddon {
  const root = resolve(__dirname, '..', '..', '..');
  // From dist/libs/speech/src or libs/speech/src (tests): the repository root holds build/.
  const candidates = [join(root, 'build', 'native', 'whisper', 'svc_whisper.node'), join(root, '..', 'build', 'native', 'whisper', 'svc_whisper.node')];
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error(`the speech addon is not built (looked for ${candidates[0]}): run node scripts/build-native.mjs --addon whisper`);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(found) as WhisperAddon;
}
