import { Controller, HttpCode, Inject, Post, Req, Res } from '@nestjs/common';
import { FastifyReply, FastifyRequest } from 'fastify';
import { ClientSignal } from '../../http/src/request-scope.decorator';
import { AudioRequest, readAudioRequest } from './audio/audio-request';
import { renderTranscript } from './rendering/transcript-formats';
import { Transcriber } from './transcriber';

/** POST /v1/audio/transcriptions and /v1/audio/translations (-whisper): OpenAI's audio routes. */
@Controller('v1/audio')
export class AudioController {
  constructor(@Inject(Transcriber) private readonly transcriber: Transcriber) {}

  @Post('transcriptions')
  @HttpCode(200)
  async transcriptions(@Req() req: FastifyRequest, @Res() reply: FastifyReply, @ClientSignal() signal: AbortSignal): Promise<void> {
    await this.answer(await readAudioRequest(req, 'transcribe', this.transcriber), reply, signal);
  }

  @Post('translations')
  @HttpCode(200)
  async translations(@Req() req: FastifyRequest, @Res() reply: FastifyReply, @ClientSignal() signal: AbortSignal): Promise<void> {
    await this.answer(await readAudioRequest(req, 'translate', this.transcriber), reply, signal);
  }

  private async answer(a: AudioRequest, reply: FastifyReply, signal: AbortSignal): Promise<void> {
    const r = await this.transcriber.transcribe(a.wav, { language: a.language, translate: a.task === 'translate', prompt: a.prompt }, signal);
    const out = renderTranscript(r, a.format, { task: a.task, languageName: a.task === 'translate' ? 'english' : this.transcriber.languageName(r.language), seconds: r.seconds });
    await reply.status(200).header('content-type', out.contentType).header('x-svc-transcribe-ms', String(Math.round(r.ms))).send(out.body);
  }
}
