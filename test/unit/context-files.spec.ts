import { decodeState, encodeState } from '../../libs/contexts/src/snapshot/kv-quant';
import { floatToHalf, halfToFloat } from '../../libs/contexts/src/snapshot/f16';
import { decodeSnapshot, encodeSnapshot, SnapshotFormatError } from '../../libs/contexts/src/snapshot/snapshot-file';

/** A llama.cpp sequence state as SNAPSHOT-FORMAT.md describes it: f16 K rows, transposed f16 V. */
function fakeState(cells: number, row: number, ext = 0): { state: Buffer; values: number[] } {
  const parts: Buffer[] = [];
  const u32 = (v: number) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
  const i32 = (v: number) => { const b = Buffer.alloc(4); b.writeInt32LE(v); parts.push(b); };
  const values: number[] = [];
  const f16s = (n: number) => {
    const b = Buffer.alloc(n * 2);
    for (let i = 0; i < n; i++) {
      const v = Math.sin(values.length * 0.37) * (1 + (values.length % 7));
      values.push(v);
      b.writeUInt16LE(floatToHalf(v), i * 2);
    }
    parts.push(b);
  };
  u32(0xaf143cd8);
  i32(3);
  u32(1); // n_stream
  u32(cells);
  for (let c = 0; c < cells; c++) {
    i32(c);
    u32(1);
    if (ext) parts.push(Buffer.alloc(ext, 7));
    i32(3);
  }
  u32(1); // v_trans
  u32(1); // n_layer
  i32(1); // K: f16
  const rb = Buffer.alloc(8);
  rb.writeBigUInt64LE(BigInt(row * 2));
  parts.push(rb);
  f16s(row * cells);
  i32(1); // V: f16, transposed
  u32(2);
  u32(row);
  f16s(row * cells);
  return { state: Buffer.concat(parts), values };
}

describe('KV payload precisions (kv-quant)', () => {
  it.each(['q8', 'vq8'] as const)('%s keeps every structural byte and each value within half a step', (precision) => {
    const { state, values } = fakeState(40, 64);
    const coded = encodeState(state, precision);
    expect(coded.length).toBeLessThan(state.length * 0.7);
    const back = decodeState(coded, precision);
    expect(back.length).toBe(state.length);
    const headerBytes = 4 * 4 + 40 * 12 + 8 + 4 + 8; // magic, seq, n_stream, cells; cell meta; v_trans, n_layer; K type, row bytes
    expect(back.subarray(0, headerBytes).equals(state.subarray(0, headerBytes))).toBe(true);
    const maxAbs = Math.max(...values.map(Math.abs));
    const kAt = headerBytes;
    for (let i = 0; i < 40 * 64; i++) {
      const v = halfToFloat(back.readUInt16LE(kAt + i * 2));
      expect(Math.abs(v - values[i])).toBeLessThanOrEqual(maxAbs / 127 / 2 + 0.01);
    }
  });

  it('vq8 uses one scale per vector: fewer than q8 when vectors are longer than 32 values', () => {
    const { state } = fakeState(40, 128);
    expect(encodeState(state, 'vq8').length).toBeLessThan(encodeState(state, 'q8').length);
  });

  it('reads states with the 12-byte cell extension (M-RoPE models)', () => {
    const { state } = fakeState(8, 32, 12);
    expect(decodeState(encodeState(state, 'q8'), 'q8').length).toBe(state.length);
  });

  it('refuses what is not a sequence state; f32 passes any state through', () => {
    expect(() => encodeState(Buffer.alloc(64, 1), 'q8')).toThrow(/not a llama.cpp sequence state/);
    const { state } = fakeState(4, 32);
    expect(() => encodeState(state.subarray(0, state.length - 3), 'vq8')).toThrow();
    expect(encodeState(state, 'f32')).toBe(state);
  });
});

describe('context files (snapshot-file)', () => {
  const header = { svc_version: '0.3.0', model: 'm', weights: 'sha256:ab', layout: 'llama/L1', precision: 'f32' as const, created: 1 };
  const tokens = Int32Array.from([1, 2, 3]);
  const payload = Buffer.from('payload');

  it('round-trips plain and sealed files, and the prefix says which', () => {
    const plain = encodeSnapshot('snapshot', header, tokens, payload);
    expect(plain.subarray(0, 8).toString('latin1')).toBe('SVCCTX\0\0');
    expect([plain.readUInt16LE(8), plain.readUInt16LE(10)]).toEqual([2, 0]);
    expect(decodeSnapshot('snapshot', plain)).toMatchObject({ version: 2, sealed: false, header, payload });
    const sealed = encodeSnapshot('export', header, tokens, payload, 'k');
    expect(sealed.subarray(0, 8).toString('latin1')).toBe('SVCX\0\0\0\0');
    expect(sealed.readUInt16LE(10)).toBe(1);
    const open = decodeSnapshot('export', sealed, 'k');
    expect(Array.from(open.tokens)).toEqual([1, 2, 3]);
    expect(open.payload.equals(payload)).toBe(true);
  });

  it('refuses the wrong kind, key, seal state, version, and any edited byte', () => {
    const sealed = encodeSnapshot('snapshot', header, tokens, payload, 'k');
    const err = (f: () => unknown) => { try { f(); } catch (e) { expect(e).toBeInstanceOf(SnapshotFormatError); return (e as Error).message; } throw new Error('no error'); };
    expect(err(() => decodeSnapshot('export', sealed, 'k'))).toBe('not a context export (.svcx)');
    expect(err(() => decodeSnapshot('snapshot', sealed, 'other'))).toMatch(/failed authentication/);
    expect(err(() => decodeSnapshot('snapshot', sealed))).toMatch(/sealed; the server has no -context-key/);
    expect(err(() => decodeSnapshot('snapshot', encodeSnapshot('snapshot', header, tokens, payload), 'k'))).toMatch(/refuses unsealed/);
    const flipped = Buffer.from(sealed);
    flipped[8] = 1; // the version is authenticated too
    expect(err(() => decodeSnapshot('snapshot', flipped, 'k'))).toMatch(/failed authentication/);
    const v9 = Buffer.from(sealed);
    v9.writeUInt16LE(9, 8);
    expect(err(() => decodeSnapshot('snapshot', v9, 'k'))).toBe('unsupported snapshot version 9');
    const cut = encodeSnapshot('snapshot', header, tokens, payload).subarray(0, 30);
    expect(err(() => decodeSnapshot('snapshot', cut))).toMatch(/^corrupt context file/);
  });
});
