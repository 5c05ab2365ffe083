import { hugePagesLine, thpUsable, useHugePages } from '../../libs/engine/src/models/huge-pages';
import { defaultMemoryBudget, usableMemory } from '../../libs/engine/src/models/residency';

const GiB = 1 << 30;
const MADVISE = 'always [madvise] never\n';

describe('-huge-pages policy', () => {
  it('reads the kernel setting: advice works under always and madvise, not never or without THP', () => {
    expect(thpUsable('[always] madvise never\n')).toBe(true);
    expect(thpUsable(MADVISE)).toBe(true);
    expect(thpUsable('always madvise [never]\n')).toBe(false);
    expect(thpUsable(null)).toBe(false);
  });

  it('auto: models of 32 MiB or more whose weights compute on the CPU and take under half the memory', () => {
    const base = { mode: 'auto' as const, thpSetting: MADVISE, totalBytes: 16 * GiB };
    expect(useHugePages({ ...base, weightsOnCpu: true, fileBytes: 0.5 * GiB })).toBe(true);
    expect(useHugePages({ ...base, weightsOnCpu: true, fileBytes: 1.2e6 })).toBe(false);
    expect(useHugePages({ ...base, weightsOnCpu: true, fileBytes: 8 * GiB })).toBe(false);
    expect(useHugePages({ ...base, weightsOnCpu: false, fileBytes: 0.5 * GiB })).toBe(false);
    expect(useHugePages({ ...base, weightsOnCpu: true, fileBytes: 0.5 * GiB, thpSetting: 'always madvise [never]' })).toBe(false);
    expect(useHugePages({ ...base, weightsOnCpu: true, fileBytes: 0.5 * GiB, thpSetting: null })).toBe(false);
  });

  it('on forces it wherever the kernel allows; off never', () => {
    const base = { thpSetting: MADVISE, totalBytes: 16 * GiB, fileBytes: 12 * GiB };
    expect(useHugePages({ ...base, mode: 'on', weightsOnCpu: false })).toBe(true);
    expect(useHugePages({ ...base, mode: 'on', weightsOnCpu: true, thpSetting: null })).toBe(false);
    expect(useHugePages({ ...base, mode: 'off', weightsOnCpu: true, fileBytes: 1 })).toBe(false);
  });

  it('says in the boot log what went on huge pages, and why not', () => {
    const MiB = 1 << 20;
    expect(hugePagesLine({ advisedBytes: 500 * MiB, collapsedBytes: 0, error: null, collapseError: null }, { advisedBytes: 440 * MiB, collapsedBytes: 100 * MiB, error: null, collapseError: null }))
      .toBe('2 MiB pages: 500 MiB of weights; 440 MiB of KV cache and compute buffers (100 MiB of it already in use, moved)');
    expect(hugePagesLine({ advisedBytes: 0, collapsedBytes: 0, error: 'madvise(MADV_HUGEPAGE): Invalid argument', collapseError: null }, { advisedBytes: 0, collapsedBytes: 0, error: null, collapseError: null }))
      .toMatch(/; madvise\(MADV_HUGEPAGE\): Invalid argument$/);
    expect(hugePagesLine({ advisedBytes: 4 * MiB, collapsedBytes: 0, error: null, collapseError: null }, { advisedBytes: 4 * MiB, collapsedBytes: 0, error: null, collapseError: 'madvise(MADV_COLLAPSE): Resource temporarily unavailable' }))
      .toMatch(/\(0 MiB of it already in use, moved\); madvise\(MADV_COLLAPSE\): Resource temporarily unavailable$/);
  });
});

describe('the memory a process may use', () => {
  const GiB = 1024 ** 3;
  it('is the container\'s limit where it is below the machine\'s memory (a pod sized its budget from the node)', () => {
    expect(usableMemory(64 * GiB, 8 * GiB)).toBe(8 * GiB);
    expect(defaultMemoryBudget(usableMemory(64 * GiB, 8 * GiB))).toBe(6 * GiB);
    // No limit: cgroup v2 reports "max" as 2^64, Node 0 or undefined where it cannot tell.
    expect(usableMemory(64 * GiB, 2 ** 64)).toBe(64 * GiB);
    expect(usableMemory(64 * GiB, 0)).toBe(64 * GiB);
    expect(usableMemory(64 * GiB, undefined)).toBe(64 * GiB);
    expect(defaultMemoryBudget(GiB)).toBe(512 * 1024 ** 2);
  });
});
