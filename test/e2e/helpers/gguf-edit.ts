import { readFileSync, writeFileSync } from 'node:fs';

/**
 * A copy of a GGUF (v2/v3) file with one more string key/value: a model's metadata as another
 * converter would write it (a rerank template), without a fixture kind of its own. The tensor
 * data moves as a whole, realigned; tensor offsets are relative to it and stay as they are.
 */
export function withStringKv(src: string, dst: string, key: string, value: string): void {
  const buf = readFileSync(src);
  if (buf.toString('latin1', 0, 4) !== 'GGUF') throw new Error(`${src} is not a GGUF file`);
  let at = 8;
  const nTensors = Number(buf.readBigUInt64LE(at));
  const nKv = Number(buf.readBigUInt64LE(at + 8));
  at += 16;
  const kvStart = at;
  let alignment = 32;
  const str = () => {
    const n = Number(buf.readBigUInt64LE(at));
    const s = buf.toString('utf8', at + 8, at + 8 + n);
    at += 8 + n;
    return s;
  };
  const SIZES: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const skipValue = (type: number): void => {
    if (type === 8) str();
    else if (type === 9) {
      const inner = buf.readUInt32LE(at);
      const n = Number(buf.readBigUInt64LE(at + 4));
      at += 12;
      for (let i = 0; i < n; i++) skipValue(inner);
    } else if (SIZES[type] !== undefined) at += SIZES[type];
    else throw new Error(`GGUF value type ${type} unknown`);
  };
  for (let i = 0; i < nKv; i++) {
    const k = str();
    const type = buf.readUInt32LE(at);
    at += 4;
    if (k === 'general.alignment' && type === 4) alignment = buf.readUInt32LE(at);
    skipValue(type);
  }
  const kvEnd = at;
  for (let i = 0; i < nTensors; i++) {
    str();
    const dims = buf.readUInt32LE(at);
    at += 4 + 8 * dims + 4 + 8;
  }
  const infoEnd = at;
  const dataStart = Math.ceil(infoEnd / alignment) * alignment;
  const kb = Buffer.from(key);
  const vb = Buffer.from(value);
  const kv = Buffer.alloc(8 + kb.length + 4 + 8 + vb.length);
  kv.writeBigUInt64LE(BigInt(kb.length), 0);
  kb.copy(kv, 8);
  kv.writeUInt32LE(8, 8 + kb.length);
  kv.writeBigUInt64LE(BigInt(vb.length), 12 + kb.length);
  vb.copy(kv, 20 + kb.length);
  const head = Buffer.concat([buf.subarray(0, kvStart), buf.subarray(kvStart, kvEnd), kv, buf.subarray(kvEnd, infoEnd)]);
  head.writeBigUInt64LE(BigInt(nKv + 1), 16);
  const pad = Buffer.alloc((alignment - (head.length % alignment)) % alignment);
  writeFileSync(dst, Buffer.concat([head, pad, buf.subarray(dataStart)]));
}
