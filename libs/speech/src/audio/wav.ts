/** A WAV file's layout, read from its header: enough to refuse it before any sample is decoded. */
export interface WavInfo {
  /** 1 PCM integer, 3 IEEE float (WAVE_FORMAT_EXTENSIBLE resolved to its sub-format). */
  format: number;
  channels: number;
  rate: number;
  bits: number;
  /** Length of the audio, from the data chunk's size. */
  seconds: number;
}

export class NotWavError extends Error {}

/**
 * Checks a RIFF/WAVE file's header: integer PCM (8, 16, 24, 32 bit) or float
 * (32, 64 bit), WAVE_FORMAT_EXTENSIBLE included, any rate and channel count.
 * The samples themselves are decoded by the speech addon, off the JS thread,
 * as whisper-cli decodes them. Not RIFF/WAVE: NotWavError (415); a WAV this
 * server cannot read: an Error naming what is wrong (400).
 */
export function inspectWav(buf: Uint8Array): WavInfo {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  if (b.length < 12 || b.toString('latin1', 0, 4) !== 'RIFF' || b.toString('latin1', 8, 12) !== 'WAVE') throw new NotWavError('not a WAV file: send RIFF/WAVE audio');
  let fmt: Omit<WavInfo, 'seconds'> | undefined;
  for (let off = 12; off + 8 <= b.length; ) {
    const id = b.toString('latin1', off, off + 4);
    const size = b.readUInt32LE(off + 4);
    const body = b.subarray(off + 8, Math.min(b.length, off + 8 + size));
    if (id === 'fmt ') fmt = readFormat(body);
    else if (id === 'data') {
      if (!fmt) throw new Error('the WAV file has no fmt chunk before its data');
      const frames = Math.floor(body.length / ((fmt.bits / 8) * fmt.channels));
      return { ...fmt, seconds: frames / fmt.rate };
    }
    off += 8 + size + (size % 2);
  }
  throw new Error(fmt ? 'the WAV file has no data chunk' : 'the WAV file has no fmt chunk');
}

function readFormat(b: Buffer): Omit<WavInfo, 'seconds'> {
  if (b.length < 16) throw new Error('the WAV fmt chunk is too short');
  let format = b.readUInt16LE(0);
  const channels = b.readUInt16LE(2);
  const rate = b.readUInt32LE(4);
  const bits = b.readUInt16LE(14);
  // WAVE_FORMAT_EXTENSIBLE: the real format is the first two bytes of its sub-format GUID.
  if (format === 0xfffe && b.length >= 26) format = b.readUInt16LE(24);
  if (format !== 1 && format !== 3) throw new Error(`WAV format ${format} is not PCM or float: send PCM or 32/64-bit float audio`);
  if (channels < 1) throw new Error('the WAV file has no channels');
  // miniaudio's limit (MA_MAX_CHANNELS), which decodes the samples.
  if (channels > 254) throw new Error(`a WAV file of ${channels} channels is not audio this server reads (at most 254)`);
  if (b.readUInt16LE(12) === 0) throw new Error('the WAV fmt chunk says each frame is 0 bytes (block align 0)');
  if (rate < 1000 || rate > 384000) throw new Error(`a sample rate of ${rate} Hz is not audio this server reads`);
  const ok = format === 1 ? [8, 16, 24, 32].includes(bits) : [32, 64].includes(bits);
  if (!ok) throw new Error(`${bits}-bit ${format === 1 ? 'PCM' : 'float'} WAV is not supported`);
  return { format, channels, rate, bits };
}
