import { ManifestStore } from '../manifest-store';
import { PullProgress, PullService } from './pull-service';

export interface PullCliOptions {
  /** The -addr of a server that may be running (host:port). */
  host: string;
  port: number;
  storeDir: string;
  insecure?: boolean;
}

/**
 * `svc pull <name>`: asks a running server at -addr (so it sees the model at
 * once), else pulls straight into the store. Progress is drawn on stderr.
 */
export async function runPullCommand(name: string, o: PullCliOptions): Promise<number> {
  const bar = new ProgressBar();
  const host = o.host === '0.0.0.0' || o.host === '::' ? '127.0.0.1' : o.host;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${o.port}/api/pull`;
  let res: Response | undefined;
  try {
    res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: name, insecure: o.insecure }) });
  } catch {
    res = undefined; // no server: pull directly
  }
  try {
    if (res) await readStream(res, (p) => bar.update(p));
    else await new PullService(new ManifestStore(o.storeDir, true)).pull(name, { insecure: o.insecure, onProgress: (p) => bar.update(p) });
    bar.done();
    return 0;
  } catch (err) {
    bar.done();
    process.stderr.write(`svc: pull ${name}: ${(err as Error).message}\n`);
    return 1;
  }
}

async function readStream(res: Response, on: (p: PullProgress) => void): Promise<void> {
  if (!res.ok || !res.body) {
    const text = await res.text();
    let msg = text;
    try {
      msg = JSON.parse(text).error ?? text;
    } catch {
      // not JSON
    }
    throw new Error(msg || `server answered ${res.status}`);
  }
  let buf = '';
  const dec = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += dec.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const obj = JSON.parse(line) as PullProgress & { error?: string };
      if (obj.error) throw new Error(obj.error);
      on(obj);
    }
  }
}

/** One line per status, redrawn in place on a terminal (plain lines otherwise). */
class ProgressBar {
  private last = '';
  private readonly tty = process.stderr.isTTY;

  update(p: PullProgress): void {
    let line = p.status;
    if (p.total) {
      const frac = Math.min(1, (p.completed ?? 0) / p.total);
      const width = 30;
      const fill = Math.round(frac * width);
      line = `${p.status} [${'#'.repeat(fill)}${' '.repeat(width - fill)}] ${(frac * 100).toFixed(0).padStart(3)}% ${mb(p.completed ?? 0)}/${mb(p.total)}`;
    }
    if (this.tty) {
      const newStatus = this.last.split(' [')[0] !== p.status;
      process.stderr.write(`${newStatus && this.last ? '\n' : '\r'}${line}\x1b[K`);
    } else if (line.split(' [')[0] !== this.last.split(' [')[0] || p.completed === p.total) {
      if (line !== this.last) process.stderr.write(line + '\n');
    }
    this.last = line;
  }

  done(): void {
    if (this.tty && this.last) process.stderr.write('\n');
  }
}

function mb(n: number): string {
  return n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB` : `${(n / 1024).toFixed(0)} KiB`;
}
