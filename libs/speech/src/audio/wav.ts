/** Whisper hears 16 kHz mono. */
export const WHISPER_RATE = 16000;

export class NotWavError extends Error {}

interface Format {
  /** 1 PCM integer, 3 IEEE float. */
  code: number;
  channels: number;
  rate: number;
  bits: number;
}

/**
 * A RIFF/WAVE file as 16 kHz mono float samples: integer PCM (8, 16, 24, 32
 * bit) or float (32, 64 bit), WAVE_FORMAT_EXTENSIBLE included; channels are
 * averaged and other rates resampled. Anything else throws NotWavError (415)
 * or a plain Error naming what is wrong with the file (400).
 */
export function decodeWav(buf: Buffer): { samples: Float32Array; seconds: number } {
  if (buf.length < 12 || buf.toString('latin1', 0, 4) !== 'RIFF' || buf.toString('latin1', 8, 12) !== 'WAVE') throw new NotWavError('not a WAV file: send RIFF/WAVE audio');
  let fmt: Format | undefined;
  let data: Buffer | undefined;
  for (let off = 12; off + 8 <= buf.length; ) {
    const id = buf.toString('latin1', off, off + 4);
    const size = buf.readUInt32LE(off + 4);
    const body = buf.subarray(off + 8, Math.min(buf.length, off + 8 + size));
    if (id === 'fmt ') fmt = readFormat(body);
    else if (id === 'data') {
      data = body;
      break;
    }
    off += 8 + size + (size % 2);
  }
  if (!fmt) throw new Error('the WAV file has no fmt chunk');
  if (!data) throw new Error('the WAV file has no data chunk');
  const mono = toMono(data, fmt);
  return { samples: resample(mono, fmt.rate, WHISPER_RATE), seconds: mono.length / fmt.rate };
}

function readFormat(b: Buffer): Format {
  if (b.length < 16) throw new Error('the WAV fmt chunk is too short');
  let code = b.readUInt16LE(0);
  const channels = b.readUInt16LE(2);
  const rate = b.readUInt32LE(4);
  const bits = b.readUInt16LE(14);
  // WAVE_FORMAT_EXTENSIBLE: the real format is the first two bytes of its sub-format GUID.
  if (code === 0xfffe && b.length >= 26) code = b.readUInt16LE(24);
  if (code !== 1 && code !== 3) throw new Error(`WAV format ${code} is not PCM or float: send PCM or 32-bit float audio`);
  if (channels < 1) throw new Error('the WAV file has no channels');
  if (rate < 1000 || rate > 384000) throw new Error(`a sample rate of ${rate} Hz is not audio this server reads`);
  const ok = code === 1 ? [8, 16, 24, 32].includes(bits) : [32, 64].includes(bits);
  if (!ok) throw new Error(`${bits}-bit ${code === 1 ? 'PCM' : 'float'} WAV is not supported`);
  return { code, channels, rate, bits };
}

function toMono(data: Buffer, f: Format): Float32Array {
  const width = f.bits / 8;
  const frames = Math.floor(data.length / (width * f.channels));
  const out = new Float32Array(frames);
  const read = sampleReader(data, f);
  for (let i = 0; i < frames; i++) {
    let s = 0;
    for (let c = 0; c < f.channels; c++) s += read((i * f.channels + c) * width);
    out[i] = s / f.channels;
  }
  return out;
}

function sampleReader(d: Buffer, f: Format): (off: number) => number {
  if (f.code === 3) return f.bits === 32 ? (o) => d.readFloatLE(o) : (o) => d.readDoubleLE(o);
  switch (f.bits) {
    case 8:
      return (o) => (d[o] - 128) / 128;
    case 16:
      return (o) => d.readInt16LE(o) / 32768;
    case 24:
      return (o) => d.readIntLE(o, 3) / 8388608;
    default:
      return (o) => d.readInt32LE(o) / 2147483648;
  }
}

/**
 * Band-limited resampling (windowed sinc, Hann window, 16 zero crossings of
 * the lower rate's Nyquist frequency): a lower rate is low-passed first, so no
 * alias of the high frequencies lands in the band whisper listens to. Common
 * rate pairs reduce to a few phases (48 kHz → 16 kHz: 1, 44.1 kHz: 160), whose
 * filters are computed once: a dot product per output sample.
 */
export function resample(x: Float32Array, from: number, to: number): Float32Array {
  if (from === to) return x;
  const g = gcd(from, to);
  const up = to / g;
  const down = from / g;
  const cutoff = Math.min(1, to / from);
  const half = Math.ceil(16 / cutoff);
  const width = 2 * half + 1;
  // One filter per phase (which fraction of an input step the output sample falls at).
  const phases = Math.min(up, MAX_PHASES);
  const table = new Float32Array(phases * width);
  for (let p = 0; p < phases; p++) {
    const frac = p / phases;
    let norm = 0;
    for (let k = 0; k < width; k++) {
      const t = k - half - frac;
      const w = Math.abs(t) >= half ? 0 : 0.5 + 0.5 * Math.cos((Math.PI * t) / half);
      const v = (t === 0 ? 1 : Math.sin(Math.PI * cutoff * t) / (Math.PI * cutoff * t)) * w;
      table[p * width + k] = v;
      norm += v;
    }
    for (let k = 0; k < width; k++) table[p * width + k] /= norm;
  }
  const n = Math.floor((x.length * up) / down);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const pos = (i * down) / up;
    const base = Math.floor(pos);
    const phase = Math.min(phases - 1, Math.round((pos - base) * phases));
    const row = phase * width;
    let acc = 0;
    for (let k = 0; k < width; k++) {
      const j = base + k - half;
      if (j >= 0 && j < x.length) acc += x[j] * table[row + k];
    }
    out[i] = acc;
  }
  return out;
}

/** Odd rate pairs (a 44100 → 16000 has 160 phases) beyond this share the nearest of this many. */
const MAX_PHASES = 1024;

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}
