import { openSync, readSync, closeSync, fstatSync } from 'node:fs';

/** GGUF key/values read from a file's header without touching its tensors. */
export interface GgufMetadata {
  version: number;
  tensorCount: number;
  /** Scalars and strings as values; arrays as { array: type, length } unless short. */
  kv: Record<string, unknown>;
  /** Elements in all tensors (the parameter count), from the tensor table; undefined if it could not be read. */
  paramCount?: number;
}

const enum T {
  U8 = 0, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64,
}

/** Reads a file forward in chunks (each read takes its offset before touching `buf`, which a refill replaces), so a 150k-entry vocabulary never needs the whole file in memory. */
class ChunkReader {
  private buf = Buffer.alloc(0);
  private bufStart = 0;
  pos = 0;
  constructor(private readonly fd: number, private readonly size: number) {}

  private ensure(n: number): void {
    const have = this.bufStart + this.buf.length - this.pos;
    if (have >= n) return;
    if (this.pos + n > this.size) throw new Error('truncated GGUF header');
    const want = Math.max(n, 1 << 20);
    const chunk = Buffer.alloc(Math.min(want, this.size - this.pos));
    readSync(this.fd, chunk, 0, chunk.length, this.pos);
    this.buf = chunk;
    this.bufStart = this.pos;
  }
  private at(n: number): number {
    this.ensure(n);
    const off = this.pos - this.bufStart;
    this.pos += n;
    return off;
  }
  u8(): number { const o = this.at(1); return this.buf.readUInt8(o); }
  i8(): number { const o = this.at(1); return this.buf.readInt8(o); }
  u16(): number { const o = this.at(2); return this.buf.readUInt16LE(o); }
  i16(): number { const o = this.at(2); return this.buf.readInt16LE(o); }
  u32(): number { const o = this.at(4); return this.buf.readUInt32LE(o); }
  i32(): number { const o = this.at(4); return this.buf.readInt32LE(o); }
  f32(): number { const o = this.at(4); return this.buf.readFloatLE(o); }
  f64(): number { const o = this.at(8); return this.buf.readDoubleLE(o); }
  u64(): number { const o = this.at(8); return Number(this.buf.readBigUInt64LE(o)); }
  i64(): number { const o = this.at(8); return Number(this.buf.readBigInt64LE(o)); }
  str(): string {
    const len = this.u64();
    if (len > 64 << 20) throw new Error('implausible GGUF string length');
    const off = this.at(len);
    return this.buf.toString('utf8', off, off + len);
  }
  skip(n: number): void { this.pos += n; }
}

const SIZES: Partial<Record<number, number>> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const SHORT_ARRAY = 32;

function readValue(r: ChunkReader, type: number, maxArray = SHORT_ARRAY): unknown {
  switch (type) {
    case T.U8: return r.u8();
    case T.I8: return r.i8();
    case T.U16: return r.u16();
    case T.I16: return r.i16();
    case T.U32: return r.u32();
    case T.I32: return r.i32();
    case T.F32: return r.f32();
    case T.BOOL: return r.u8() !== 0;
    case T.STRING: return r.str();
    case T.U64: return r.u64();
    case T.I64: return r.i64();
    case T.F64: return r.f64();
    case T.ARRAY: {
      const itemType = r.u32();
      const length = r.u64();
      if (length <= maxArray) return Array.from({ length }, () => readValue(r, itemType, maxArray));
      const size = SIZES[itemType];
      if (size !== undefined) r.skip(size * length);
      else for (let i = 0; i < length; i++) readValue(r, itemType, maxArray);
      return { array: itemType, length };
    }
    default:
      throw new Error(`unknown GGUF value type ${type}`);
  }
}

/**
 * Returns undefined for files that are not GGUF (legacy ggml, whisper .bin ...). `allArrays`
 * reads vocabularies too (/api/show verbose: megabytes for a 150k-token model).
 */
export function readGgufMetadata(path: string, opts: { allArrays?: boolean } = {}): GgufMetadata | undefined {
  const maxArray = opts.allArrays ? Infinity : SHORT_ARRAY;
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    const r = new ChunkReader(fd, size);
    if (size < 24 || r.u32() !== 0x46554747) return undefined; // "GGUF" little-endian
    const version = r.u32();
    const tensorCount = r.u64();
    const kvCount = r.u64();
    const kv: Record<string, unknown> = {};
    for (let i = 0; i < kvCount; i++) {
      const key = r.str();
      kv[key] = readValue(r, r.u32(), maxArray);
    }
    return { version, tensorCount, kv, paramCount: paramCountOf(r, tensorCount) };
  } finally {
    closeSync(fd);
  }
}

/** The tensor table follows the key/values: name, dimensions, type, offset per tensor. */
function paramCountOf(r: ChunkReader, tensorCount: number): number | undefined {
  try {
    let n = 0;
    for (let i = 0; i < tensorCount; i++) {
      r.str();
      const dims = r.u32();
      if (dims > 8) return undefined;
      let e = 1;
      for (let d = 0; d < dims; d++) e *= r.u64();
      r.skip(4 + 8); // type, offset
      n += e;
    }
    return n;
  } catch {
    return undefined; // a table cut short: the rest of the header still stands
  }
}

const ENCODER_ARCHS = new Set(['bert', 'nomic-bert', 'nomic-bert-moe', 'jina-bert-v2', 'jina-bert-v3', 'modern-bert', 'neo-bert', 't5encoder', 'eurobert']);

/** Capabilities as GET /v1/models lists them, from metadata alone. */
export function capabilitiesOf(meta: GgufMetadata | undefined): string[] {
  if (!meta) return [];
  const arch = String(meta.kv['general.architecture'] ?? '');
  if (meta.kv['general.type'] === 'mmproj' || arch === 'clip' || meta.kv['general.type'] === 'adapter') return [];
  if (meta.tensorCount === 0) return [];
  if (ENCODER_ARCHS.has(arch) || (meta.kv[`${arch}.pooling_type`] !== undefined && !meta.kv['tokenizer.chat_template'])) {
    return ['embeddings'];
  }
  return meta.kv['tokenizer.chat_template'] ? ['chat'] : ['completion'];
}
