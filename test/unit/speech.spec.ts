import { clock, renderTranscript } from '../../libs/speech/src/rendering/transcript-formats';
import { inspectWav, NotWavError } from '../../libs/speech/src/audio/wav';
import { WhisperResult } from '../../libs/speech/src/whisper-addon';

/** A WAV file around raw sample bytes. */
function wavFile(o: { code: number; channels: number; rate: number; bits: number; data: Buffer; extensible?: boolean; extra?: Buffer }): Buffer {
  const fmt = Buffer.alloc(o.extensible ? 40 : 16);
  fmt.writeUInt16LE(o.extensible ? 0xfffe : o.code, 0);
  fmt.writeUInt16LE(o.channels, 2);
  fmt.writeUInt32LE(o.rate, 4);
  fmt.writeUInt32LE((o.rate * o.channels * o.bits) / 8, 8);
  fmt.writeUInt16LE((o.channels * o.bits) / 8, 12);
  fmt.writeUInt16LE(o.bits, 14);
  if (o.extensible) {
    fmt.writeUInt16LE(22, 16);
    fmt.writeUInt16LE(o.code, 24);
  }
  const chunk = (id: string, body: Buffer) => {
    const h = Buffer.alloc(8);
    h.write(id, 0, 'latin1');
    h.writeUInt32LE(body.length, 4);
    return Buffer.concat([h, body, body.length % 2 ? Buffer.alloc(1) : Buffer.alloc(0)]);
  };
  const body = Buffer.concat([Buffer.from('WAVE', 'latin1'), chunk('fmt ', fmt), ...(o.extra ? [chunk('LIST', o.extra)] : []), chunk('data', o.data)]);
  const head = Buffer.alloc(8);
  head.write('RIFF', 0, 'latin1');
  head.writeUInt32LE(body.length, 4);
  return Buffer.concat([head, body]);
}

describe('WAV header inspection', () => {
  it('reads the layout and the length from the header, skipping other chunks', () => {
    expect(inspectWav(wavFile({ code: 1, channels: 1, rate: 16000, bits: 16, data: Buffer.alloc(8), extra: Buffer.from('odd') }))).toEqual({ format: 1, channels: 1, rate: 16000, bits: 16, seconds: 4 / 16000 });
    expect(inspectWav(wavFile({ code: 1, channels: 2, rate: 44100, bits: 24, data: Buffer.alloc(6 * 44100) })).seconds).toBe(1);
    expect(inspectWav(wavFile({ code: 3, channels: 1, rate: 48000, bits: 32, data: Buffer.alloc(4 * 24000), extensible: true }))).toMatchObject({ format: 3, seconds: 0.5 });
    expect(inspectWav(wavFile({ code: 3, channels: 6, rate: 8000, bits: 64, data: Buffer.alloc(48 * 8000) })).seconds).toBe(1);
    expect(inspectWav(wavFile({ code: 1, channels: 1, rate: 8000, bits: 8, data: Buffer.alloc(8000) })).seconds).toBe(1);
  });

  it('refuses what is not WAV (415) apart from a damaged or unsupported WAV (400)', () => {
    expect(() => inspectWav(Buffer.from('ID3 mp3 bytes here'))).toThrow(NotWavError);
    expect(() => inspectWav(wavFile({ code: 2, channels: 1, rate: 16000, bits: 4, data: Buffer.alloc(4) }))).toThrow('WAV format 2 is not PCM or float');
    expect(() => inspectWav(wavFile({ code: 1, channels: 1, rate: 16000, bits: 12, data: Buffer.alloc(4) }))).toThrow('12-bit PCM WAV is not supported');
    expect(() => inspectWav(wavFile({ code: 1, channels: 1, rate: 500, bits: 16, data: Buffer.alloc(4) }))).toThrow('a sample rate of 500 Hz is not audio this server reads');
    const noData = wavFile({ code: 1, channels: 1, rate: 16000, bits: 16, data: Buffer.alloc(0) });
    expect(() => inspectWav(noData.subarray(0, noData.length - 8))).toThrow('the WAV file has no data chunk');
  });
});

describe('transcript formats', () => {
  const result: WhisperResult = {
    language: 'en',
    ms: 5,
    seconds: 3725.4,
    segments: [
      { start: 0, end: 2.5, text: ' Hello there', noSpeechProb: 0.1, tokens: [{ id: 50364, text: '[_BEG_]', p: 1, logprob: 0, special: true }, { id: 1, text: ' Hello', p: 0.5, logprob: -0.5, special: false }, { id: 2, text: ' there', p: 0.25, logprob: -1.5, special: false }] },
      { start: 31, end: 3725.25, text: ' general Kenobi', noSpeechProb: 0, tokens: [{ id: 3, text: ' gener', p: 1, logprob: 0, special: false }, { id: 4, text: 'al', p: 1, logprob: 0, special: false }, { id: 5, text: ' Kenobi', p: 1, logprob: 0, special: false }] },
    ],
  };
  const meta = { task: 'transcribe' as const, languageName: 'english', seconds: 3725.4 };

  it('json, text, srt and vtt', () => {
    expect(renderTranscript(result, 'json', meta).body).toEqual({ text: 'Hello there general Kenobi', usage: { type: 'duration', seconds: 3726 } });
    expect(renderTranscript(result, 'text', meta).body).toBe('Hello there general Kenobi\n');
    expect(renderTranscript(result, 'srt', meta).body).toBe('1\n00:00:00,000 --> 00:00:02,500\nHello there\n\n2\n00:00:31,000 --> 01:02:05,250\ngeneral Kenobi\n');
    expect(renderTranscript(result, 'vtt', meta)).toEqual({ contentType: 'text/vtt; charset=utf-8', body: 'WEBVTT\n\n00:00:00.000 --> 00:00:02.500\nHello there\n\n00:00:31.000 --> 01:02:05.250\ngeneral Kenobi\n' });
    expect(clock(59.9996, ',')).toBe('00:01:00,000');
  });

  it('verbose_json: segments with their window, text tokens, mean logprob; times kept inside the audio', () => {
    const v = renderTranscript(result, 'verbose_json', meta).body as Record<string, any>;
    expect(v).toMatchObject({ task: 'transcribe', language: 'english', duration: 3725.4, text: 'Hello there general Kenobi' });
    expect(v.segments[0]).toMatchObject({ id: 0, seek: 0, start: 0, end: 2.5, text: ' Hello there', tokens: [1, 2], temperature: 0, avg_logprob: -1, no_speech_prob: 0.1 });
    expect(v.segments[1]).toMatchObject({ id: 1, seek: 3000, tokens: [3, 4, 5] });
    expect(v.segments[0].compression_ratio).toBeGreaterThan(0);
    expect(v.words).toBeUndefined();
    const early = renderTranscript({ ...result, segments: [{ ...result.segments[0], start: -1000, end: 9999 }] }, 'verbose_json', { ...meta, seconds: 2 }).body as Record<string, any>;
    expect([early.segments[0].start, early.segments[0].end]).toEqual([0, 2]);
  });
});
