import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeFileAtomic, writeFileAtomicAsync } from '../../libs/store/src/atomic-file';

describe('writeFileAtomic', () => {
  it('replaces the file whole and leaves no temp file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-atomic-'));
    const path = join(dir, 'm.json');
    writeFileSync(path, 'old');
    writeFileAtomic(path, 'new');
    expect([readFileSync(path, 'utf8'), readdirSync(dir)]).toEqual(['new', ['m.json']]);
  });

  it('a write that fails removes its temp file (a full disk left one per failed spill, never cleaned)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-atomic-'));
    // The rename cannot replace a folder: the write fails after the temp file was written.
    const path = join(dir, 'taken');
    mkdirSync(join(path, 'inside'), { recursive: true });
    expect(() => writeFileAtomic(path, Buffer.alloc(4096))).toThrow();
    expect(readdirSync(dir)).toEqual(['taken']);
  });
});

describe('writeFileAtomicAsync', () => {
  it('replaces the file whole, and a write that fails leaves no temp file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-atomic-'));
    const path = join(dir, 'index.bin');
    writeFileSync(path, 'old');
    await writeFileAtomicAsync(path, Buffer.from('new'));
    expect([readFileSync(path, 'utf8'), readdirSync(dir)]).toEqual(['new', ['index.bin']]);
    mkdirSync(join(dir, 'taken', 'inside'), { recursive: true });
    await expect(writeFileAtomicAsync(join(dir, 'taken'), Buffer.alloc(4096))).rejects.toThrow();
    expect(readdirSync(dir).sort()).toEqual(['index.bin', 'taken']);
  });

  it('writes data given in pieces in order, and a piece source that fails leaves the old file and no temp file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-atomic-'));
    const path = join(dir, 'index.bin');
    await writeFileAtomicAsync(path, [Buffer.from('ab'), Buffer.alloc(0), Buffer.from('cd')]);
    expect(readFileSync(path, 'utf8')).toBe('abcd');
    function* failing(): Generator<Buffer> {
      yield Buffer.from('half');
      throw new Error('no more');
    }
    await expect(writeFileAtomicAsync(path, failing())).rejects.toThrow('no more');
    expect([readFileSync(path, 'utf8'), readdirSync(dir)]).toEqual(['abcd', ['index.bin']]);
  });
});
