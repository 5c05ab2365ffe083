import { createHash, timingSafeEqual } from 'node:crypto';

/** sha256 of a key, as 32 bytes. */
export function keyDigest(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

/** `sha256:<64 hex>` → its digest; a plain key → the digest of the key. */
export function storedKeyDigest(entry: string): Buffer {
  const m = /^sha256:([0-9a-fA-F]{64})$/.exec(entry.trim());
  return m ? Buffer.from(m[1], 'hex') : keyDigest(entry);
}

/**
 * THE constant-time key comparison. Keys are held only as sha256 digests; a
 * presented key is hashed and compared against every stored digest with
 * crypto.timingSafeEqual (equal 32-byte lengths, so no length leak), and the
 * loop never exits early, so the time does not depend on which key (if any)
 * matched or how much of it did.
 */
export class KeyRing<T> {
  private readonly entries: { digest: Buffer; owner: T }[] = [];

  add(digest: Buffer, owner: T): void {
    if (digest.length !== 32) throw new Error('a key digest is 32 bytes');
    this.entries.push({ digest, owner });
  }

  get size(): number {
    return this.entries.length;
  }

  /** The owner of `presented`, or undefined. */
  match(presented: string): T | undefined {
    const d = keyDigest(presented);
    let found: T | undefined;
    for (const e of this.entries) {
      // Non-short-circuit: every entry is compared.
      if (timingSafeEqual(d, e.digest) && found === undefined) found = e.owner;
    }
    return found;
  }
}

/** Constant-time equality of two strings (via their digests). */
export function constantTimeEqual(a: string, b: string): boolean {
  return timingSafeEqual(keyDigest(a), keyDigest(b));
}
