import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { Precision } from './kv-quant';

/**
 * Snapshot (.svcctx) and export (.svcx) files. Layout (little-endian), see
 * libs/contexts/SNAPSHOT-FORMAT.md:
 *   magic    8 bytes  "SVCCTX\0\0" (snapshot) or "SVCX\0\0\0\0" (export)
 *   version  u16      2 for 0.3.0; 1 = legacy (weights named by layout only)
 *   flags    u16      bit 0: sealed
 *   body:    header_len u32, header JSON, token_count u32, tokens i32[], payload_len u64, payload
 * A sealed file's body is AES-256-GCM: nonce (12) | ciphertext | tag (16), key =
 * sha256(-context-key), the 12 leading bytes as additional data.
 */
export type FileKind = 'snapshot' | 'export';

export interface SnapshotHeader {
  svc_version: string;
  model: string;
  /** "sha256:<hex>" of the weights; absent in legacy snapshots. */
  weights?: string;
  /** Architecture and shape: how legacy snapshots named their weights. */
  layout: string;
  precision: Precision;
  created: number;
  /** Where model-written text first begins in the tokens (KvContext.answerFrom); absent when none. */
  answer_from?: number;
  /** Export only: who owns it and at which marking. */
  owner?: string;
  marking?: string;
  context?: string;
}

export interface SnapshotFile {
  kind: FileKind;
  version: number;
  sealed: boolean;
  header: SnapshotHeader;
  tokens: Int32Array;
  payload: Buffer;
}

export const CURRENT_VERSION = 2;
const MAGIC: Record<FileKind, Buffer> = { snapshot: Buffer.from('SVCCTX\0\0', 'latin1'), export: Buffer.from('SVCX\0\0\0\0', 'latin1') };
const PREFIX = 12;

export class SnapshotFormatError extends Error {
  constructor(message: string, readonly status = 400) {
    super(message);
  }
}

export function encodeSnapshot(kind: FileKind, header: SnapshotHeader, tokens: Int32Array, payload: Buffer, key?: string): Buffer {
  const h = Buffer.from(JSON.stringify(header));
  const body = Buffer.alloc(4 + h.length + 4 + tokens.length * 4 + 8);
  let o = body.writeUInt32LE(h.length, 0);
  o += h.copy(body, o);
  o = body.writeUInt32LE(tokens.length, o);
  for (const t of tokens) o = body.writeInt32LE(t, o);
  body.writeBigUInt64LE(BigInt(payload.length), o);
  const prefix = Buffer.alloc(PREFIX);
  MAGIC[kind].copy(prefix, 0);
  prefix.writeUInt16LE(CURRENT_VERSION, 8);
  prefix.writeUInt16LE(key ? 1 : 0, 10);
  const plain = Buffer.concat([body, payload]);
  return Buffer.concat([prefix, key ? seal(plain, key, prefix) : plain]);
}

export function decodeSnapshot(kind: FileKind, file: Buffer, key?: string): SnapshotFile {
  if (file.length < PREFIX || !file.subarray(0, 8).equals(MAGIC[kind])) {
    throw new SnapshotFormatError(kind === 'snapshot' ? 'not a context snapshot (.svcctx)' : 'not a context export (.svcx)');
  }
  const version = file.readUInt16LE(8);
  const flags = file.readUInt16LE(10);
  const sealed = (flags & 1) === 1;
  if (version < 1 || version > CURRENT_VERSION) throw new SnapshotFormatError(`unsupported snapshot version ${version}`);
  if (flags > 1) throw new SnapshotFormatError(`corrupt context file: unknown flags 0x${flags.toString(16)}`);
  let body = file.subarray(PREFIX);
  if (sealed) {
    if (!key) throw new SnapshotFormatError('this file is sealed; the server has no -context-key to open it', 400);
    body = unseal(body, key, file.subarray(0, PREFIX));
  } else if (key) {
    throw new SnapshotFormatError('this server seals context files (-context-key) and refuses unsealed ones', 400);
  }
  try {
    let o = 0;
    const hLen = body.readUInt32LE(o);
    o += 4;
    const header = JSON.parse(body.toString('utf8', o, o + hLen)) as SnapshotHeader;
    o += hLen;
    const n = body.readUInt32LE(o);
    o += 4;
    const tokens = new Int32Array(n);
    for (let i = 0; i < n; i++, o += 4) tokens[i] = body.readInt32LE(o);
    const pLen = Number(body.readBigUInt64LE(o));
    o += 8;
    const payload = body.subarray(o, o + pLen);
    if (payload.length !== pLen) throw new Error('truncated');
    if (o + pLen !== body.length) throw new Error(`${body.length - o - pLen} bytes after the payload`);
    return { kind, version, sealed, header, tokens, payload };
  } catch (err) {
    throw new SnapshotFormatError(`corrupt context file: ${(err as Error).message}`);
  }
}

function keyOf(secret: string): Buffer {
  return createHash('sha256').update(secret).digest();
}

function seal(plain: Buffer, secret: string, aad: Buffer): Buffer {
  const nonce = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', keyOf(secret), nonce);
  c.setAAD(aad);
  const ct = Buffer.concat([c.update(plain), c.final()]);
  return Buffer.concat([nonce, ct, c.getAuthTag()]);
}

function unseal(body: Buffer, secret: string, aad: Buffer): Buffer {
  if (body.length < 28) throw new SnapshotFormatError('sealed context file is truncated');
  const d = createDecipheriv('aes-256-gcm', keyOf(secret), body.subarray(0, 12));
  d.setAAD(aad);
  d.setAuthTag(body.subarray(body.length - 16));
  try {
    return Buffer.concat([d.update(body.subarray(12, body.length - 16)), d.final()]);
  } catch {
    throw new SnapshotFormatError('sealed context file failed authentication: tampered, or sealed with another key', 400);
  }
}
