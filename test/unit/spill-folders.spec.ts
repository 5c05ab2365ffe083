import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { removeDeadSpills, spillRoot } from '../../libs/engine/src/models/kept-contexts';

/** Spill folders under $TMPDIR: which a starting server removes, which it leaves. */
describe('spill folders at boot', () => {
  let dir: string;
  // Above Linux's largest pid_max (2^22): no process has it.
  const DEAD = 4_194_399;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-spill-test-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  const stale = (folder: string) => {
    mkdirSync(join(folder, 'spill', 'x'), { recursive: true });
    writeFileSync(join(folder, 'spill', 'x', 'ctx_1.kv'), 'state');
    return join(folder, 'spill', 'x', 'ctx_1.kv');
  };

  it('names the host, so containers sharing $TMPDIR with the same pid do not share a folder', () => {
    expect(spillRoot(6, dir)).toBe(join(dir, `svc-6-${hostname().replace(/[^A-Za-z0-9.-]/g, '_').slice(0, 64)}`));
  });

  it('clears a folder with its own name: a restarted container (same pid, same host) found its killed predecessor\'s files', () => {
    const file = stale(spillRoot(process.pid, dir));
    removeDeadSpills(dir);
    expect(existsSync(file)).toBe(false);
    expect(readFileSync(join(spillRoot(process.pid, dir), 'host'), 'utf8')).toBe(hostname());
  });

  it('removes dead processes of this host, keeps other hosts\' and live ones', () => {
    const deadHere = stale(spillRoot(DEAD, dir));
    const otherHost = stale(join(dir, `svc-${DEAD}-another-host`));
    const alive = stale(spillRoot(process.ppid, dir));
    // From before the host was in the name: judged by its host file.
    const legacyHere = stale(join(dir, `svc-${DEAD + 1}`));
    writeFileSync(join(dir, `svc-${DEAD + 1}`, 'host'), hostname());
    const legacyElsewhere = stale(join(dir, `svc-${DEAD + 2}`));
    writeFileSync(join(dir, `svc-${DEAD + 2}`, 'host'), 'another-host');
    removeDeadSpills(dir);
    expect([deadHere, otherHost, alive, legacyHere, legacyElsewhere].map((f) => existsSync(f))).toEqual([false, true, true, false, true]);
  });
});
