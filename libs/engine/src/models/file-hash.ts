import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';

/** sha256 of a file, streamed so a large model never sits in memory twice. */
export function sha256File(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    createReadStream(path, { highWaterMark: 4 << 20 })
      .on('data', (d) => h.update(d))
      .on('error', reject)
      .on('end', () => resolve(h.digest('hex')));
  });
}
