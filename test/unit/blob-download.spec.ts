/**
 * downloadBlob against real HTTP servers on 127.0.0.1 that misbehave: no byte ranges,
 * more bytes than declared, an empty blob, a 416 after the last byte, a stalled body,
 * a file replaced between two tries by a server that ignores If-Range.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BlobJob, downloadBlob, PARALLEL_THRESHOLD } from '../../libs/store/src/pull/blob-download';

jest.setTimeout(60_000);

const hex = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function serve(fn: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; server: Server; requests: Array<string | undefined> }> {
  const requests: Array<string | undefined> = [];
  const server = createServer((req, res) => {
    requests.push(req.headers.range as string | undefined);
    fn(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/blob`, server, requests };
}

function job(url: string, dir: string, data: { digest?: string; size?: number }, more: Partial<BlobJob> = {}): BlobJob {
  return {
    ...data,
    key: 'k',
    partialDir: join(dir, 'partial'),
    dest: (h) => join(dir, `sha256-${h}`),
    get: (headers, signal) => fetch(url, { headers, signal }),
    onProgress: () => undefined,
    ...more,
  };
}

describe('downloadBlob', () => {
  const servers: Server[] = [];
  afterAll(() => servers.forEach((s) => (s.closeAllConnections(), s.close())));
  const start = async (fn: (req: IncomingMessage, res: ServerResponse) => void) => {
    const s = await serve(fn);
    servers.push(s.server);
    return s;
  };

  it('a pull called off before its download starts downloads nothing (an aborted signal fires no listener: it ran on)', async () => {
    const data = Buffer.alloc(4096, 3);
    const s = await start((_req, res) => res.end(data));
    const dir = mkdtempSync(join(tmpdir(), 'svc-blob-'));
    const ac = new AbortController();
    ac.abort();
    await expect(downloadBlob(job(s.url, dir, { size: data.length }, { signal: ac.signal }))).rejects.toThrow();
    expect(s.requests).toEqual([]);
    expect(existsSync(join(dir, `sha256-${hex(data)}`))).toBe(false);
  });

  it('falls back to one download from a server without byte ranges, and downloads nothing more', async () => {
    const data = Buffer.alloc(PARALLEL_THRESHOLD + 4096, 7);
    const s = await start((_req, res) => res.writeHead(200, { 'content-length': data.length }).end(data));
    const dir = mkdtempSync(join(tmpdir(), 'blob-'));
    const got = await downloadBlob(job(s.url, dir, { digest: `sha256:${hex(data)}`, size: data.length }));
    expect(got).toBe(hex(data));
    expect(readFileSync(join(dir, `sha256-${got}`)).equals(data)).toBe(true);
    // The four ranged tries, then one plain download; no part went on downloading after the refusal.
    expect(s.requests.filter((r) => r === undefined)).toHaveLength(1);
    expect(s.requests.length).toBeLessThanOrEqual(5);
    expect(readdirSync(join(dir, 'partial'))).toEqual([]);
  });

  it('stops at the declared size: a server sending more fails the pull at once and leaves no part', async () => {
    const s = await start((_req, res) => {
      res.writeHead(200);
      const chunk = Buffer.alloc(64 * 1024, 1);
      let sent = 0;
      const more = () => {
        if (res.destroyed || sent > 50 << 20) return void res.end();
        sent += chunk.length;
        res.write(chunk, more);
      };
      more();
    });
    const dir = mkdtempSync(join(tmpdir(), 'blob-'));
    const t0 = Date.now();
    await expect(downloadBlob(job(s.url, dir, { digest: `sha256:${'0'.repeat(64)}`, size: 1000 }))).rejects.toThrow('the registry sent more bytes than the 1000 the manifest declares');
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(s.requests).toHaveLength(1);
    expect(readdirSync(join(dir, 'partial'))).toEqual([]);
  });

  it('pulls an empty blob', async () => {
    const s = await start((_req, res) => res.writeHead(200, { 'content-length': 0 }).end());
    const dir = mkdtempSync(join(tmpdir(), 'blob-'));
    const empty = hex(Buffer.alloc(0));
    expect(await downloadBlob(job(s.url, dir, { digest: `sha256:${empty}`, size: 0 }))).toBe(empty);
    expect(existsSync(join(dir, `sha256-${empty}`))).toBe(true);
    expect(readdirSync(join(dir, 'partial'))).toEqual([]);
  });

  it('a file of unknown size already whole in its part: the 416 for the next byte completes it', async () => {
    const data = Buffer.from('GGUF and the rest of a small file');
    const s = await start((_req, res) => res.writeHead(416, { 'content-range': `bytes */${data.length}` }).end());
    const dir = mkdtempSync(join(tmpdir(), 'blob-'));
    const j = job(s.url, dir, {});
    mkdirSync(j.partialDir, { recursive: true });
    writeFileSync(join(j.partialDir, 'k.part0'), data);
    writeFileSync(join(j.partialDir, 'k.part0.validator'), '"v1"'); // as its first bytes came with
    expect(await downloadBlob(j)).toBe(hex(data));
    expect(s.requests).toEqual([`bytes=${data.length}-`]);
    expect(readdirSync(j.partialDir)).toEqual([]);
  });

  it('a body that stalls is dropped and resumed where it stopped', async () => {
    const data = Buffer.alloc(100_000, 3);
    let first = true;
    const s = await start((req, res) => {
      const from = Number(/bytes=(\d+)-/.exec(String(req.headers.range ?? ''))?.[1] ?? 0);
      const body = data.subarray(from);
      res.writeHead(from ? 206 : 200, { 'content-length': body.length });
      if (first) {
        first = false;
        res.write(body.subarray(0, 40_000)); // then nothing: the connection stays open
        return;
      }
      res.end(body);
    });
    const dir = mkdtempSync(join(tmpdir(), 'blob-'));
    expect(await downloadBlob(job(s.url, dir, { digest: `sha256:${hex(data)}`, size: data.length }, { stallMs: 300 }))).toBe(hex(data));
    expect(s.requests).toEqual([undefined, 'bytes=40000-']);
  });
});

describe('downloadBlob of a plain URL (no digest)', () => {
  const servers: Server[] = [];
  afterAll(() => servers.forEach((s) => (s.closeAllConnections(), s.close())));

  it('resumes only under If-Range: a file replaced between two tries is downloaded again whole, never spliced', async () => {
    let data = Buffer.alloc(200_000, 1);
    let etag = '"v1"';
    let dropFirst = true;
    const seen: Array<{ range?: string; ifRange?: string }> = [];
    const s = await serve((req, res) => {
      seen.push({ range: req.headers.range as string | undefined, ifRange: req.headers['if-range'] as string | undefined });
      const m = /bytes=(\d+)-/.exec(String(req.headers.range ?? ''));
      const honour = m && (!req.headers['if-range'] || req.headers['if-range'] === etag);
      const from = honour ? Number(m![1]) : 0;
      const body = data.subarray(from);
      res.writeHead(honour ? 206 : 200, { etag, 'content-length': body.length });
      if (dropFirst) {
        dropFirst = false;
        // Half, then the connection drops; the file changes before the retry.
        res.write(body.subarray(0, 100_000), () => {
          data = Buffer.alloc(200_000, 2);
          etag = '"v2"';
          res.socket?.destroy();
        });
        return;
      }
      res.end(body);
    });
    servers.push(s.server);
    const dir = mkdtempSync(join(tmpdir(), 'blob-'));
    const got = await downloadBlob(job(s.url, dir, { size: 200_000 }));
    expect(got).toBe(hex(Buffer.alloc(200_000, 2)));
    expect(seen[1]).toEqual({ range: 'bytes=100000-', ifRange: '"v1"' });
    expect(readdirSync(join(dir, 'partial'))).toEqual([]);
  });
  it('a server that ignores ranges and ends the body at the same byte each time fails after bounded tries, leaving no part', async () => {
    const data = Buffer.alloc(200_000, 3);
    // Declares the whole file, sends 100 kB of it and ends (as a server whose file is shorter than its HEAD said).
    const s = await serve((_req, res) => {
      res.writeHead(200);
      res.end(data.subarray(0, 100_000));
    });
    servers.push(s.server);
    const dir = mkdtempSync(join(tmpdir(), 'blob-'));
    const t0 = Date.now();
    await expect(downloadBlob(job(s.url, dir, { size: data.length }))).rejects.toThrow(/failed: the body ended at byte 100000 of 200000 again|failed: the registry ignored the range/);
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(s.requests.length).toBeLessThanOrEqual(16);
    expect(readdirSync(join(dir, 'partial'))).toEqual([]);
  });

  it('a permanent refusal mid-pull leaves neither the part nor its validator', async () => {
    let n = 0;
    const s = await serve((_req, res) => {
      if (n++ === 0) {
        res.writeHead(200, { etag: '"v1"' });
        res.end(Buffer.alloc(1000, 5)); // short: the next try resumes
      } else res.writeHead(404).end();
    });
    servers.push(s.server);
    const dir = mkdtempSync(join(tmpdir(), 'blob-'));
    await expect(downloadBlob(job(s.url, dir, { size: 5000 }))).rejects.toThrow('404');
    expect(readdirSync(join(dir, 'partial'))).toEqual([]);
  });

  /** A file served with byte ranges that ignores If-Range: a 206 from whatever file it has now. */
  async function ignoringIfRange(file: () => { data: Buffer; headers: Record<string, string> }, cut?: (res: ServerResponse, body: Buffer) => boolean) {
    const s = await serve((req, res) => {
      const { data, headers } = file();
      const m = /bytes=(\d+)-(\d*)/.exec(String(req.headers.range ?? ''));
      if (!m) {
        res.writeHead(200, { ...headers, 'content-length': data.length });
        if (!cut?.(res, data)) res.end(data);
        return;
      }
      const from = Number(m[1]);
      const end = m[2] ? Math.min(Number(m[2]), data.length - 1) : data.length - 1;
      if (from >= data.length) return void res.writeHead(416, { ...headers, 'content-range': `bytes */${data.length}` }).end();
      const body = data.subarray(from, end + 1);
      res.writeHead(206, { ...headers, 'content-length': body.length, 'content-range': `bytes ${from}-${end}/${data.length}` }).end(body);
    });
    servers.push(s.server);
    return s;
  }
  /** Makes the next whole-file GET send `n` bytes and then nothing, the connection left open. */
  const holdAfter = (n: number) => {
    let once = true;
    return (res: ServerResponse, body: Buffer) => {
      if (!once) return false;
      once = false;
      res.write(body.subarray(0, n));
      return true;
    };
  };
  /** A pull stopped (as a client gone) once its part holds `bytes`: the part stays to resume. */
  async function interrupt(j: BlobJob, bytes: number) {
    const ac = new AbortController();
    const done = downloadBlob({ ...j, signal: ac.signal });
    const part = join(j.partialDir, 'k.part0');
    while (!existsSync(part) || readFileSync(part).length < bytes) await new Promise((r) => setTimeout(r, 10));
    ac.abort();
    await expect(done).rejects.toThrow();
    expect(readdirSync(j.partialDir).sort()).toEqual(['k.part0', 'k.part0.validator']);
  }

  it('a 206 with another ETag (a replaced file of the same size, If-Range ignored) is not appended: the file comes again whole', async () => {
    let file = { data: Buffer.alloc(200_000, 1), headers: { etag: '"v1"' } };
    let cut = true;
    const s = await ignoringIfRange(() => file, (res, body) => {
      if (!cut) return false;
      cut = false;
      // Half, then the connection drops; the file is replaced before the retry.
      res.write(body.subarray(0, 100_000), () => {
        file = { data: Buffer.alloc(200_000, 2), headers: { etag: '"v2"' } };
        res.socket?.destroy();
      });
      return true;
    });
    const dir = mkdtempSync(join(tmpdir(), 'blob-'));
    expect(await downloadBlob(job(s.url, dir, { size: 200_000 }))).toBe(hex(Buffer.alloc(200_000, 2)));
    expect(s.requests).toEqual([undefined, 'bytes=100000-', undefined]);
    expect(readdirSync(join(dir, 'partial'))).toEqual([]);
  });

  it('a pull after the file changed size starts over without a range, even under the same ETag', async () => {
    let file = { data: Buffer.alloc(2000, 1), headers: { etag: '"same"' } };
    const s = await ignoringIfRange(() => file, holdAfter(1000));
    const dir = mkdtempSync(join(tmpdir(), 'blob-'));
    await interrupt(job(s.url, dir, { size: 2000 }), 1000);
    file = { data: Buffer.alloc(3000, 4), headers: { etag: '"same"' } };
    expect(await downloadBlob(job(s.url, dir, { size: 3000 }))).toBe(hex(file.data));
    expect(s.requests).toEqual([undefined, undefined]);
  });

  it('under Last-Modified, size unknown: a 206 with the same date but another total (replaced within the second) starts over', async () => {
    const lastModified = 'Mon, 30 Nov 2026 10:00:00 GMT';
    let file = { data: Buffer.alloc(2000, 1), headers: { 'last-modified': lastModified } };
    const s = await ignoringIfRange(() => file, holdAfter(1000));
    const dir = mkdtempSync(join(tmpdir(), 'blob-'));
    await interrupt(job(s.url, dir, {}), 1000);
    file = { data: Buffer.alloc(5000, 5), headers: { 'last-modified': lastModified } };
    expect(await downloadBlob(job(s.url, dir, {}))).toBe(hex(file.data));
    expect(s.requests).toEqual([undefined, 'bytes=1000-', undefined]);
  });

  it('size unknown: a 416 from a file now shorter than the part does not complete it', async () => {
    let file = { data: Buffer.alloc(2000, 1), headers: { etag: '"v1"' } };
    const s = await ignoringIfRange(() => file, holdAfter(1000));
    const dir = mkdtempSync(join(tmpdir(), 'blob-'));
    await interrupt(job(s.url, dir, {}), 1000);
    file = { data: Buffer.alloc(500, 6), headers: { etag: '"v2"' } };
    expect(await downloadBlob(job(s.url, dir, {}))).toBe(hex(file.data));
    expect(s.requests).toEqual([undefined, 'bytes=1000-', undefined]);
  });

  it('parallel ranges: a part finished before the file was replaced is not joined to parts fetched after', async () => {
    const size = PARALLEL_THRESHOLD + 4096;
    const span = Math.ceil(size / 4);
    const v2 = Buffer.alloc(size, 2);
    const s = await ignoringIfRange(() => ({ data: v2, headers: { etag: '"v2"' } }));
    const dir = mkdtempSync(join(tmpdir(), 'blob-'));
    // Part 0 whole from the old file (as a pull stopped after it left it); the other three are fetched now, from the new one.
    const j = job(s.url, dir, { size });
    mkdirSync(j.partialDir, { recursive: true });
    writeFileSync(join(j.partialDir, 'k.part0'), Buffer.alloc(span, 1));
    writeFileSync(join(j.partialDir, 'k.part0.validator'), '"v1"');
    expect(await downloadBlob(j)).toBe(hex(v2));
    expect(s.requests.filter((r) => r === `bytes=0-${span - 1}`)).toHaveLength(1); // part 0 again, once
    expect(readdirSync(j.partialDir)).toEqual([]);
  });

  it('parallel ranges of a file that changes on every request fail with a clear 502 and leave no part', async () => {
    const size = PARALLEL_THRESHOLD + 4096;
    const data = Buffer.alloc(size, 3);
    let n = 0;
    const s = await ignoringIfRange(() => ({ data, headers: { etag: `"v${n++}"` } }));
    const dir = mkdtempSync(join(tmpdir(), 'blob-'));
    const j = job(s.url, dir, { size });
    await expect(downloadBlob(j)).rejects.toThrow('the file changed while it downloaded');
    expect(s.requests).toHaveLength(8);
    expect(readdirSync(j.partialDir)).toEqual([]);
  });
});
