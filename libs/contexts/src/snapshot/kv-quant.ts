import { floatToHalf, halfToFloat } from './f16';

/**
 * 8-bit snapshot precisions over llama.cpp's per-sequence KV state.
 *
 * The state (llama_context::state_seq_get_data) is: magic 0xaf143cd8 (u32),
 * the source seq id (i32), then llama_kv_cache::state_write: n_stream, per
 * stream the cell count, per-cell metadata (pos, n_seq_id, a 12-byte cell
 * extension on M-RoPE/PLE models, seq ids), and per layer the K rows then the
 * V rows (or V transposed). We walk it, keep every structural byte, and replace each f32
 * or f16 tensor block with 8-bit codes:
 *   q8  — blocks of 32 values, one f32 scale per block (absmax / 127), like Q8_0;
 *   vq8 — one f32 scale per vector (a K/V row of one cell, or one transposed V
 *         row), absmax / 127: "vector-quantized" 8-bit, smaller, a little coarser.
 * Restore dequantizes back into the original type, so llama.cpp reads an
 * ordinary state. Other tensor types are kept raw.
 */
export type Precision = 'f32' | 'q8' | 'vq8';

const GGML_F32 = 0;
const GGML_F16 = 1;
const BLOCK = 32;

interface Chunk {
  raw?: Buffer;
  floats?: { type: number; rowLen: number; count: number; data: Buffer };
}

class Cursor {
  pos = 0;
  constructor(readonly buf: Buffer) {}
  u32(): number { const v = this.buf.readUInt32LE(this.pos); this.pos += 4; return v; }
  i32(): number { const v = this.buf.readInt32LE(this.pos); this.pos += 4; return v; }
  u64(): number { const v = Number(this.buf.readBigUInt64LE(this.pos)); this.pos += 8; return v; }
}

const STATE_MAGIC = 0xaf143cd8;
/** sizeof(llama_kv_cell_ext): written per cell only on some models, which the state does not say. */
const CELL_EXT_BYTES = 12;

/** A state split into structural bytes and float tensor blocks, and where its cells sit. */
interface ParsedState {
  chunks: Chunk[];
  nStream: number;
  /** The first stream's cell positions, in cell order. */
  positions: Int32Array;
}

/** Splits a state into structural bytes and float tensor blocks; throws if the layout is not understood. */
function parseState(state: Buffer): ParsedState {
  try {
    return parseWith(state, 0);
  } catch (err) {
    try {
      return parseWith(state, CELL_EXT_BYTES);
    } catch {
      throw err;
    }
  }
}

function parseWith(state: Buffer, extBytes: number): ParsedState {
  const c = new Cursor(state);
  if (state.length < 8 || c.u32() !== STATE_MAGIC) throw new Error('not a llama.cpp sequence state');
  c.i32(); // the sequence it was read from
  const chunks: Chunk[] = [];
  let rawFrom = 0;
  const flushRaw = (to: number) => {
    if (to > rawFrom) chunks.push({ raw: state.subarray(rawFrom, to) });
  };
  const tensor = (type: number, rowLen: number, count: number, bytes: number) => {
    flushRaw(c.pos);
    const data = state.subarray(c.pos, c.pos + bytes);
    if (data.length !== bytes) throw new Error('truncated state');
    chunks.push(type === GGML_F32 || type === GGML_F16 ? { floats: { type, rowLen, count, data } } : { raw: data });
    c.pos += bytes;
    rawFrom = c.pos;
  };
  const nStream = c.u32();
  let positions: Int32Array = new Int32Array(0);
  for (let s = 0; s < nStream; s++) {
    const cells = c.u32();
    if (cells === 0) continue;
    // Each cell's metadata takes at least 8 bytes: a count past what is left is not a state.
    if (cells * 8 > state.length - c.pos) throw new Error(`the state claims ${cells} cells in ${state.length} bytes`);
    const pos = readCells(c, cells, extBytes);
    if (s === 0) positions = pos;
    const vTrans = c.u32();
    const nLayer = c.u32();
    for (let l = 0; l < nLayer; l++) {
      const type = c.i32();
      const rowSize = c.u64();
      const elt = type === GGML_F32 ? 4 : type === GGML_F16 ? 2 : 0;
      tensor(type, elt ? rowSize / elt : rowSize, elt ? (rowSize / elt) * cells : rowSize * cells, rowSize * cells);
    }
    for (let l = 0; l < nLayer; l++) {
      const type = c.i32();
      if (!vTrans) {
        const rowSize = c.u64();
        const elt = type === GGML_F32 ? 4 : type === GGML_F16 ? 2 : 0;
        tensor(type, elt ? rowSize / elt : rowSize, elt ? (rowSize / elt) * cells : rowSize * cells, rowSize * cells);
      } else {
        const eltSize = c.u32();
        const nEmbd = c.u32();
        tensor(type, cells, nEmbd * cells, nEmbd * cells * eltSize);
      }
    }
  }
  flushRaw(c.pos);
  if (c.pos !== state.length) throw new Error('unexpected bytes after the KV state');
  return { chunks, nStream, positions };
}

/**
 * Where a sequence state puts its cells: the positions, in cell order. A restore checks them
 * against the file's tokens and the model's limit before llama.cpp reads the state, which sizes
 * a batch by the cell count it finds (an untrusted number: 3.6 KB asking for 2^31 cells got the
 * server killed for memory) and trusts the positions.
 */
export function statePositions(state: Buffer): Int32Array {
  const { nStream, positions } = parseState(state);
  if (nStream !== 1) throw new Error(`the state holds ${nStream} KV streams; a context has one`);
  return positions;
}

/**
 * The first KV cache's cell positions, read from the state's head alone (for layouts the walk
 * does not know: two caches, sliding-window or recurrent ones, whose first cache still lists
 * its cells first): one reading per cell-extension size whose cell list fits the bytes.
 */
export function firstCachePositions(state: Buffer): Int32Array[] {
  if (state.length < 16 || state.readUInt32LE(0) !== STATE_MAGIC) return [];
  const nStream = state.readUInt32LE(8);
  if (nStream === 0) return [new Int32Array(0)];
  if (nStream > 64) return [];
  const cells = state.readUInt32LE(12);
  if (cells * 8 > state.length - 16) return [];
  const readings: Int32Array[] = [];
  for (const extBytes of [0, CELL_EXT_BYTES]) {
    const c = new Cursor(state);
    c.pos = 16;
    try {
      const pos = readCells(c, cells, extBytes);
      if (c.pos <= state.length) readings.push(pos);
    } catch {
      // this extension size reads past the end: not this layout
    }
  }
  return readings;
}

/** A cache's cell list: each cell's position, its sequence ids skipped (throws reading past the end). */
function readCells(c: Cursor, cells: number, extBytes: number): Int32Array {
  const positions = new Int32Array(cells);
  for (let i = 0; i < cells; i++) {
    positions[i] = c.i32();
    const nSeq = c.u32();
    if (nSeq > 256) throw new Error(`a cell claims ${nSeq} sequences`);
    c.pos += extBytes + 4 * nSeq;
  }
  return positions;
}

function readFloat(type: number, data: Buffer, i: number): number {
  return type === GGML_F32 ? data.readFloatLE(i * 4) : halfToFloat(data.readUInt16LE(i * 2));
}

function writeFloat(type: number, data: Buffer, i: number, v: number): void {
  if (type === GGML_F32) data.writeFloatLE(v, i * 4);
  else data.writeUInt16LE(floatToHalf(v), i * 2);
}

/** Encodes a state at the given precision (f32 = the state as llama.cpp wrote it). */
export function encodeState(state: Buffer, precision: Precision): Buffer {
  if (precision === 'f32') return state;
  const { chunks } = parseState(state);
  const parts: Buffer[] = [u32(chunks.length)];
  for (const ch of chunks) {
    if (ch.raw) {
      parts.push(Buffer.from([0]), u64(ch.raw.length), ch.raw);
      continue;
    }
    const { type, rowLen, count, data } = ch.floats!;
    const group = precision === 'q8' ? BLOCK : rowLen;
    const groups = Math.ceil(count / group);
    const out = Buffer.alloc(groups * 4 + count);
    let o = groups * 4;
    for (let g = 0; g < groups; g++) {
      const start = g * group;
      const end = Math.min(count, start + group);
      let max = 0;
      for (let i = start; i < end; i++) max = Math.max(max, Math.abs(readFloat(type, data, i)));
      const scale = max / 127;
      out.writeFloatLE(scale, g * 4);
      for (let i = start; i < end; i++) out.writeInt8(scale ? Math.round(readFloat(type, data, i) / scale) : 0, o++);
    }
    parts.push(Buffer.from([precision === 'q8' ? 1 : 2, type]), u32(rowLen), u64(count), out);
  }
  return Buffer.concat(parts);
}

/** Decodes back into a state llama.cpp can read. */
export function decodeState(payload: Buffer, precision: Precision): Buffer {
  if (precision === 'f32') return payload;
  const c = new Cursor(payload);
  const n = c.u32();
  const parts: Buffer[] = [];
  for (let k = 0; k < n; k++) {
    const kind = payload[c.pos++];
    if (kind === 0) {
      const len = c.u64();
      if (c.pos + len > payload.length) throw new Error('truncated q8/vq8 payload');
      parts.push(payload.subarray(c.pos, c.pos + len));
      c.pos += len;
      continue;
    }
    const type = payload[c.pos++];
    const rowLen = c.u32();
    const count = c.u64();
    if ((kind !== 1 && kind !== 2) || (type !== GGML_F32 && type !== GGML_F16) || rowLen === 0) throw new Error('not a q8/vq8 payload');
    const group = kind === 1 ? BLOCK : rowLen;
    // The codes and scales must be there: a forged count must not size an allocation.
    if (c.pos + Math.ceil(count / group) * 4 + count > payload.length) throw new Error('truncated q8/vq8 payload');
    const groups = Math.ceil(count / group);
    const scales = c.pos;
    let codes = c.pos + groups * 4;
    const out = Buffer.alloc(count * (type === GGML_F32 ? 4 : 2));
    for (let g = 0; g < groups; g++) {
      const scale = payload.readFloatLE(scales + g * 4);
      const end = Math.min(count, (g + 1) * group);
      for (let i = g * group; i < end; i++) writeFloat(type, out, i, payload.readInt8(codes++) * scale);
    }
    c.pos = codes;
    parts.push(out);
  }
  return Buffer.concat(parts);
}

function u32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v);
  return b;
}

function u64(v: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(v));
  return b;
}
