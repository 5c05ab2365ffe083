import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ContextRegistry, SuspendedContexts } from '../contexts/context-registry';

interface Kept {
  name: string;
  contexts: SuspendedContexts;
  /** Hidden contexts freed while the model was not loaded (stored responses deleted or evicted). */
  drops: Array<{ id: string; owner: string }>;
}

/**
 * The contexts of model files that are not loaded: what ContextRegistry.suspend
 * wrote to disk at an unload, until the same file loads again. Also the next
 * context id of every file ever loaded, so an id never names a newer context,
 * even after the file was deleted and pulled again.
 */
export class KeptContexts {
  private readonly byPath = new Map<string, Kept>();
  private readonly nextIds = new Map<string, number>();

  keep(path: string, name: string, contexts: SuspendedContexts): void {
    this.byPath.set(path, { name, contexts, drops: [] });
  }

  noteIds(path: string, nextId: number): void {
    this.nextIds.set(path, Math.max(nextId, this.nextIds.get(path) ?? 1));
  }

  /** A hidden context of a file that is not loaded: freed when it loads again (forks of it need its registry). False when none is kept for it. */
  dropLater(path: string, id: string, owner: string): boolean {
    const k = this.byPath.get(path);
    k?.drops.push({ id, owner });
    return k !== undefined;
  }

  /** Hands what was kept for `path` to its new registry (same weights only), then frees what was dropped meanwhile. */
  async adoptInto(path: string, registry: ContextRegistry): Promise<void> {
    registry.continueIdsFrom(this.nextIds.get(path) ?? 1);
    const k = this.byPath.get(path);
    if (!k) return;
    this.byPath.delete(path);
    registry.adopt(k.contexts);
    for (const d of k.drops) {
      const c = registry.get(d.id, d.owner, true);
      if (c) await registry.release(c);
    }
  }

  /** Files with contexts kept. */
  paths(): string[] {
    return [...this.byPath.keys()];
  }

  /** The file is gone: its kept contexts and their spill folder go too (its ids still go on). */
  discard(path: string): void {
    const k = this.byPath.get(path);
    this.byPath.delete(path);
    if (k) rmSync(k.contexts.spillDir, { recursive: true, force: true });
  }
}

/**
 * This process's folder under $TMPDIR: svc-<pid>-<host>. The host is in the name because a
 * container's server has the same pid at every start: another container sharing $TMPDIR would
 * share the folder, and a restarted one found its killed predecessor's files as its own.
 */
export function spillRoot(pid = process.pid, base = tmpdir()): string {
  return join(base, `svc-${pid}-${hostPart()}`);
}

function hostPart(): string {
  return hostname().replace(/[^A-Za-z0-9.-]/g, '_').slice(0, 64);
}

/**
 * Spill folders of svc processes on this host that died without their shutdown (SIGKILL, a
 * crash): nothing will read them again. A folder with our own name is one of those too (a
 * restarted container: same pid, same host). Folders of other hosts are theirs to judge.
 */
export function removeDeadSpills(base = tmpdir()): void {
  const own = spillRoot(process.pid, base);
  let names: string[];
  try {
    // $TMPDIR itself may not exist yet (a fresh volume, deploy/k8s's /data/tmp): made here, as
    // the spill folder and the media tools' temporary files need it.
    mkdirSync(base, { recursive: true });
    names = readdirSync(base);
    rmSync(own, { recursive: true, force: true });
    mkdirSync(own, { recursive: true });
    // Read by servers from before the host was in the name (svc-<pid>).
    writeFileSync(join(own, 'host'), hostname());
  } catch {
    return;
  }
  for (const name of names) {
    const m = /^svc-(\d+)(-.+)?$/.exec(name);
    const pid = Number(m?.[1]);
    if (!m || !pid || join(base, name) === own) continue;
    if (m[2] !== undefined && m[2] !== `-${hostPart()}`) continue;
    if (alive(pid)) continue;
    if (m[2] === undefined) {
      let host: string | undefined;
      try {
        host = readFileSync(join(base, name, 'host'), 'utf8');
      } catch {
        // no host recorded (a folder from before): judged by the pid alone
      }
      if (host !== undefined && host !== hostname()) continue;
    }
    rmSync(join(base, name), { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // someone else's process: not ours to judge
  }
}
