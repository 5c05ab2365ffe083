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

  /** A hidden context of a model that is not loaded: freed when it loads again (forks of it need its registry). False when none is kept under that name. */
  dropLater(name: string, id: string, owner: string): boolean {
    const k = [...this.byPath.values()].find((x) => x.name === name);
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

  /** The file is gone: its kept contexts and their spill folder go too (its ids still go on). */
  discard(path: string): void {
    const k = this.byPath.get(path);
    this.byPath.delete(path);
    if (k) rmSync(k.contexts.spillDir, { recursive: true, force: true });
  }
}

/**
 * Spill folders ($TMPDIR/svc-<pid>) of svc processes that died without their
 * shutdown (SIGKILL, a crash): nothing will read them again.
 */
export function removeDeadSpills(): void {
  let names: string[];
  try {
    names = readdirSync(tmpdir());
    // Our own folder names its host: a process of another container sharing this $TMPDIR (its
    // pids are not ours to look up) keeps its folder.
    mkdirSync(join(tmpdir(), `svc-${process.pid}`), { recursive: true });
    writeFileSync(join(tmpdir(), `svc-${process.pid}`, 'host'), hostname());
  } catch {
    return;
  }
  for (const name of names) {
    const pid = Number(/^svc-(\d+)$/.exec(name)?.[1]);
    if (!pid || pid === process.pid || alive(pid)) continue;
    let host: string | undefined;
    try {
      host = readFileSync(join(tmpdir(), name, 'host'), 'utf8');
    } catch {
      // no host recorded (a folder from before): judged by the pid alone
    }
    if (host !== undefined && host !== hostname()) continue;
    rmSync(join(tmpdir(), name), { recursive: true, force: true });
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
