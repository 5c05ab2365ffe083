import { StringDecoder } from 'node:string_decoder';

/**
 * Turns token pieces (raw bytes, possibly partial UTF-8) into text. A character
 * split across tokens comes out with the token that completes it.
 */
export class TokenTextDecoder {
  private readonly decoder = new StringDecoder('utf8');

  push(bytes: Buffer): string {
    return this.decoder.write(bytes);
  }

  end(): string {
    return this.decoder.end();
  }
}

/** OpenAI's text form of one token: its string, or `bytes:\xNN` for a partial character. */
export function tokenDisplay(bytes: Buffer): string {
  const s = bytes.toString('utf8');
  if (!s.includes('\uFFFD') || bytes.includes(Buffer.from('\uFFFD'))) return s;
  return 'bytes:' + Array.from(bytes, (b) => '\\x' + b.toString(16).padStart(2, '0')).join('');
}
