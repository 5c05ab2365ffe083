import type { IncomingMessage } from 'node:http';
import { ManifestStore } from '../manifest-store';
import { PullProgress, PullService } from './pull-service';
import { NoServerError, postToServer, ServerLink } from './server-link';

export interface PullCliOptions extends ServerLink {
  /** The -addr of a server that may be running (host:port; 0.0.0.0 and :: mean loopback). */
  host: string;
  port: number;
  storeDir: string;
  insecure?: boolean;
}

/**
 * `svc pull <name>`: asks a running server at -addr (so it sees the model at once), else, only
 * when nothing listens there, pulls straight into the store. Progress is drawn on stderr.
 */
export async function runPullCommand(name: string, o: PullCliOptions): Promise<number> {
  const bar = new ProgressBar();
  const host = o.host === '0.0.0.0' || o.host === '::' ? '127.0.0.1' : o.host;
  try {
    let res: IncomingMessage | undefined;
    try {
      res = await postToServer({ ...o, host }, '/api/pull', { model: name, insecure: o.insecure });
    } catch (err) {
      if (!(err instanceof NoServerError)) throw err;
    }
    if (res) await readStream(res, (p) => bar.update(p), o.apiKey !== undefined);
    else await new PullService(new ManifestStore(o.storeDir, true)).pull(name, { insecure: o.insecure, onProgress: (p) => bar.update(p) });
    bar.done();
    return 0;
  } catch (err) {
    bar.done();
    process.stderr.write(`svc: pull ${name}: ${(err as Error).message}\n`);
    return 1;
  }
}

async function readStream(res: IncomingMessage, on: (p: PullProgress) => void, sentKey: boolean): Promise<void> {
  const dec = new TextDecoder();
  const status = res.statusCode ?? 0;
  if (status < 200 || status > 299) {
    let text = '';
    for await (const chunk of res) text += dec.decode(chunk as Buffer, { stream: true });
    let msg = text;
    try {
      msg = JSON.parse(text).error ?? text;
    } catch {
      // not JSON
    }
    if (typeof msg !== 'string') msg = JSON.stringify(msg);
    // Say where svc pull takes a key from: the server's own message speaks of headers.
    if (status === 401) msg += sentKey ? ' (the key from -api-key or $SVC_API_KEY was refused)' : ' (svc pull sends the key given with -api-key, else $SVC_API_KEY)';
    throw new Error(msg || `server answered ${status}`);
  }
  let buf = '';
  for await (const chunk of res) {
    buf += dec.decode(chunk as Buffer, { stream: true });
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
