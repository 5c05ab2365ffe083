import { Global, Inject, Module, OnModuleInit } from '@nestjs/common';
import { AudioController } from './audio.controller';
import { Transcriber } from './transcriber';

/** Speech-to-text (-whisper): OpenAI's audio routes over whisper.cpp, its own addon beside the engine's. Global: /healthz names the model. */
@Global()
@Module({ controllers: [AudioController], providers: [Transcriber], exports: [Transcriber] })
export class SpeechModule implements OnModuleInit {
  constructor(@Inject(Transcriber) private readonly transcriber: Transcriber) {}

  /** The model loads before the server listens: a file whisper.cpp cannot read stops the boot. */
  async onModuleInit(): Promise<void> {
    if (this.transcriber.enabled) await this.transcriber.load();
  }
}
