import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { basename } from 'node:path';
import { ServerConfig, SERVER_CONFIG } from '../../../apps/server/src/config/server-config';
import { ClientGoneError, InvalidRequestError, QueueFullError, ServerShuttingDownError, StartupError } from '../../engine/src/core/errors';
import { MAX_AUDIO_SECONDS } from './audio/limits';
import { loadWhisperAddon, WhisperAddon, WhisperModel, WhisperOptions, WhisperResult } from './whisper-addon';

/** Transcriptions waiting beyond the one running before 429. */
const MAX_WAITING = 16;

/**
 * The -whisper model: loaded at boot, one transcription at a time (whisper.cpp
 * keeps one state per model; each call already uses every -threads thread),
 * the rest waiting in order up to MAX_WAITING. A client that leaves is
 * dropped from the queue, or its transcription cancelled at whisper.cpp's next check.
 */
@Injectable()
export class Transcriber implements OnApplicationShutdown {
  private readonly log = new Logger('speech');
  private addon?: WhisperAddon;
  private model?: WhisperModel;
  private loading?: Promise<WhisperModel>;
  private tail: Promise<unknown> = Promise.resolve();
  private waiting = 0;
  private closing = false;

  constructor(@Inject(SERVER_CONFIG) private readonly config: ServerConfig) {}

  get enabled(): boolean {
    return this.config.features.whisper;
  }

  /** The model's name as /healthz shows it (its file name without extension). */
  get modelName(): string {
    return basename(this.config.features.whisperModel ?? '').replace(/\.bin$/, '');
  }

  /** Loads the model (at boot, so a bad file stops the server there); later calls share the load. */
  load(): Promise<WhisperModel> {
    this.loading ??= (async () => {
      const addon = this.whisper();
      const path = this.config.features.whisperModel!;
      const t0 = performance.now();
      // Loaded at boot: a file whisper.cpp cannot read is the flag's mistake (exit 2).
      this.model = await addon.loadModel(path).catch((err: Error) => {
        throw new StartupError(`flag -whisper-model: ${path}: ${err.message}`);
      });
      this.log.log(`whisper ${addon.version}: loaded ${path} (${this.model.info.type}, ${this.model.info.multilingual ? 'multilingual' : 'English only'}) in ${(performance.now() - t0).toFixed(0)} ms`);
      return this.model;
    })();
    return this.loading;
  }

  /** ISO 639-1 code check, before anything queues. */
  knowsLanguage(code: string): boolean {
    return this.whisper().languageId(code) >= 0;
  }

  /** The language's English name, as the verbose answer gives it ("english"). */
  languageName(code: string): string {
    return this.whisper().languageName(code) || code;
  }

  private whisper(): WhisperAddon {
    this.addon ??= loadWhisperAddon();
    return this.addon;
  }

  async transcribe(audio: Float32Array | Uint8Array, opts: WhisperOptions, signal?: AbortSignal): Promise<WhisperResult> {
    if (!this.enabled) throw new InvalidRequestError('speech-to-text is off: start the server with -whisper');
    if (this.closing) throw new ServerShuttingDownError();
    if (this.waiting >= MAX_WAITING + 1) throw new QueueFullError();
    const model = await this.load();
    if (opts.translate && !model.info.multilingual) throw new InvalidRequestError(`${this.modelName} is an English-only model: it cannot translate`);
    this.waiting++;
    let counted = true;
    const leave = (): void => {
      if (!counted) return;
      counted = false;
      this.waiting--;
    };
    // A client that leaves gives its place back at once: one still queued held it until its turn
    // came (and was passed), and live clients got 429 behind 16 departed ones.
    signal?.addEventListener('abort', leave, { once: true });
    const turn = this.tail.then(() => this.run(model, audio, opts, signal));
    this.tail = turn.catch(() => undefined);
    try {
      return await turn;
    } finally {
      signal?.removeEventListener('abort', leave);
      leave();
    }
  }

  private async run(model: WhisperModel, audio: Float32Array | Uint8Array, opts: WhisperOptions, signal?: AbortSignal): Promise<WhisperResult> {
    if (signal?.aborted) throw new ClientGoneError();
    const job = model.transcribe(audio, { threads: this.config.engine.threads, maxSeconds: MAX_AUDIO_SECONDS, ...opts });
    const cancel = () => job.cancel();
    signal?.addEventListener('abort', cancel, { once: true });
    try {
      return await job.promise;
    } catch (err) {
      if (signal?.aborted) throw new ClientGoneError();
      // The addon's decoder refused the samples behind a header that looked right: the request's fault.
      const m = /^bad audio: (.*)$/s.exec((err as Error).message);
      if (m) throw new InvalidRequestError(m[1]);
      throw err;
    } finally {
      signal?.removeEventListener('abort', cancel);
    }
  }

  async onApplicationShutdown(): Promise<void> {
    this.closing = true;
    await this.tail;
    await this.model?.dispose();
  }
}
