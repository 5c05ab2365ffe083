import { createHash } from 'node:crypto';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';

export interface FakeModel {
  /** namespace/model:tag */
  name: string;
  layers: Array<{ mediaType: string; data: Buffer; /** announce this digest instead of the real one */ lieDigest?: string }>;
}

export interface RegistryOptions {
  /** Answer 401 with a Bearer challenge until the token is sent. */
  token?: string;
  /** Serve blobs from a second server (a "CDN") through a 307 redirect. */
  cdn?: boolean;
  /** Digests whose first download is cut after half the bytes. */
  dropOnce?: Set<string>;
  /** Bytes per 50 ms when set (for kill -9 mid-pull). */
  throttle?: number;
}

export interface RecordedRequest {
  server: 'registry' | 'cdn';
  method: string;
  path: string;
  range?: string;
  auth?: string;
}

export const sha256 = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;

/** A Docker-registry-v2 server (Ollama's protocol) on 127.0.0.1, for pull tests. */
export class FakeRegistry {
  readonly requests: RecordedRequest[] = [];
  private readonly blobs = new Map<string, Buffer>();
  private readonly manifests = new Map<string, unknown>();
  private registry!: Server;
  private cdnServer!: Server;
  port = 0;
  cdnPort = 0;

  constructor(private readonly opts: RegistryOptions = {}) {}

  add(m: FakeModel): { manifest: any; digests: string[] } {
    const config = Buffer.from(JSON.stringify({ model_format: 'gguf', model_family: 'llama' }));
    const layer = (mediaType: string, data: Buffer, lie?: string) => {
      const digest = lie ?? sha256(data);
      this.blobs.set(digest, data);
      return { mediaType, digest, size: data.length };
    };
    const manifest = {
      schemaVersion: 2,
      mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
      config: layer('application/vnd.docker.container.image.v1+json', config),
      layers: m.layers.map((l) => layer(l.mediaType, l.data, l.lieDigest)),
    };
    this.manifests.set(m.name, manifest);
    return { manifest, digests: manifest.layers.map((l) => l.digest) };
  }

  /** A manifest served exactly as given (a string as is, anything else as JSON): registry faults. */
  addRaw(name: string, manifest: unknown): void {
    this.manifests.set(name, typeof manifest === 'string' ? { raw: manifest } : manifest);
  }

  async start(): Promise<this> {
    this.cdnServer = await listen((req, res) => this.serveBlob('cdn', req, res, decodeURIComponent(req.url!.replace(/^\/cdn\//, ''))));
    this.cdnPort = (this.cdnServer.address() as AddressInfo).port;
    this.registry = await listen((req, res) => this.handle(req, res));
    this.port = (this.registry.address() as AddressInfo).port;
    return this;
  }

  get host(): string {
    return `127.0.0.1:${this.port}`;
  }

  async stop(): Promise<void> {
    for (const s of [this.registry, this.cdnServer]) {
      s?.closeAllConnections();
      await new Promise((r) => s?.close(r));
    }
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url!, `http://${this.host}`);
    if (url.pathname === '/token') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token: this.opts.token }));
      return;
    }
    if (this.opts.token && req.headers.authorization !== `Bearer ${this.opts.token}`) {
      this.record('registry', req);
      res.writeHead(401, { 'www-authenticate': `Bearer realm="http://${this.host}/token",service="${this.host}",scope="repository:x:pull"` }).end('{"errors":[{"code":"UNAUTHORIZED"}]}');
      return;
    }
    const m = /^\/v2\/([^/]+)\/([^/]+)\/(manifests|blobs)\/(.+)$/.exec(url.pathname);
    if (!m) return void res.writeHead(404).end();
    if (m[3] === 'manifests') {
      this.record('registry', req);
      const man = this.manifests.get(`${m[1]}/${m[2]}:${m[4]}`);
      if (!man) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[{"code":"MANIFEST_UNKNOWN"}]}');
      const raw = (man as { raw?: unknown }).raw;
      return void res.writeHead(200, { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json' }).end(typeof raw === 'string' ? raw : JSON.stringify(man));
    }
    if (this.opts.cdn) {
      this.record('registry', req);
      return void res.writeHead(307, { location: `http://127.0.0.1:${this.cdnPort}/cdn/${encodeURIComponent(m[4])}` }).end();
    }
    this.serveBlob('registry', req, res, m[4]);
  }

  private serveBlob(server: 'registry' | 'cdn', req: IncomingMessage, res: ServerResponse, digest: string): void {
    this.record(server, req);
    const data = this.blobs.get(digest);
    if (!data) return void res.writeHead(404).end();
    let start = 0;
    let end = data.length - 1;
    const r = /^bytes=(\d+)-(\d*)$/.exec(String(req.headers.range ?? ''));
    if (r) {
      start = Number(r[1]);
      if (r[2]) end = Math.min(end, Number(r[2]));
    }
    if (start >= data.length) return void res.writeHead(416, { 'content-range': `bytes */${data.length}` }).end();
    const body = data.subarray(start, end + 1);
    const headers: Record<string, string | number> = { 'content-type': 'application/octet-stream', 'content-length': body.length, 'accept-ranges': 'bytes' };
    if (r) headers['content-range'] = `bytes ${start}-${end}/${data.length}`;
    res.writeHead(r ? 206 : 200, headers);
    if (req.method === 'HEAD') return void res.end();
    if (this.opts.dropOnce?.delete(digest)) {
      res.write(body.subarray(0, body.length >> 1), () => setTimeout(() => res.socket?.destroy(), 20));
      return;
    }
    const step = this.opts.throttle;
    if (!step) return void res.end(body);
    let off = 0;
    const tick = () => {
      if (res.destroyed) return;
      if (off >= body.length) return void res.end();
      res.write(body.subarray(off, off + step));
      off += step;
      setTimeout(tick, 50);
    };
    tick();
  }

  private record(server: 'registry' | 'cdn', req: IncomingMessage): void {
    this.requests.push({ server, method: req.method!, path: req.url!, range: req.headers.range as string | undefined, auth: req.headers.authorization });
  }
}

function listen(fn: (req: IncomingMessage, res: ServerResponse) => void): Promise<Server> {
  return new Promise((resolve) => {
    const s = createServer(fn);
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
}

/** A file server for plain-URL pulls. */
export async function serveFile(path: string, data: Buffer): Promise<{ url: string; stop: () => Promise<void> }> {
  const s = await listen((req, res) => {
    if (req.url !== path) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-length': data.length }).end(req.method === 'HEAD' ? undefined : data);
  });
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}${path}`, stop: () => new Promise((r) => (s.closeAllConnections(), s.close(() => r())) as unknown as void) };
}

/**
 * A file server for plain-URL resume tests that honours Range but ignores If-Range (as some
 * do), with ETag = md5 of the content. `set` replaces the file; `holdAfter(n)` makes the next
 * GET send n bytes and then nothing, the connection left open (an interrupted download).
 */
export async function serveChangingFile(path: string, initial: Buffer) {
  let data = initial;
  let hold: number | undefined;
  const requests: Array<{ method: string; range?: string; ifRange?: string }> = [];
  const s = await listen((req, res) => {
    if (req.url !== path) return void res.writeHead(404).end();
    requests.push({ method: req.method!, range: req.headers.range as string | undefined, ifRange: req.headers['if-range'] as string | undefined });
    const headers = { etag: `"${createHash('md5').update(data).digest('hex')}"`, 'accept-ranges': 'bytes' };
    const m = /^bytes=(\d+)-$/.exec(String(req.headers.range ?? ''));
    const from = m ? Number(m[1]) : 0;
    if (from >= data.length && m) return void res.writeHead(416, { ...headers, 'content-range': `bytes */${data.length}` }).end();
    const body = data.subarray(from);
    res.writeHead(m ? 206 : 200, { ...headers, 'content-length': body.length, ...(m ? { 'content-range': `bytes ${from}-${data.length - 1}/${data.length}` } : {}) });
    if (req.method === 'HEAD') return void res.end();
    if (hold === undefined) return void res.end(body);
    res.write(body.subarray(0, hold));
    hold = undefined;
  });
  return {
    url: `http://127.0.0.1:${(s.address() as AddressInfo).port}${path}`,
    requests,
    set: (d: Buffer) => void (data = d),
    holdAfter: (n: number) => void (hold = n),
    stop: () => new Promise<void>((r) => (s.closeAllConnections(), s.close(() => r()))),
  };
}
