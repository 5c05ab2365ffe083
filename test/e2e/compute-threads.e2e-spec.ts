import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT, fixtureModel, STORIES } from './helpers/fixtures';

/**
 * The CPU addon's compute threads (ggml's thread pool, two here) sleep as soon
 * as the engine has no job: between requests they hold no CPU. OpenMP's threads,
 * which the addon used before, spun for several ms after every step (measured on
 * the 2-vCPU build machine: 6–10 ms of CPU in the 30 ms after a step, against
 * 0.2–0.4 ms with the pool paused).
 */
describe('the CPU engine between steps', () => {
  const addon = join(ROOT, 'build', 'native', 'cpu', 'svc_engine.node');

  it('uses next to no CPU once a step is done', () => {
    const script = `
      const addon = require(${JSON.stringify(addon)});
      (async () => {
        const model = await addon.loadModel(${JSON.stringify(fixtureModel(STORIES))});
        const ctx = await model.createContext({ nCtx: 1024, nBatch: 512, nUbatch: 512, nSeqMax: 4, nThreads: 2, nThreadsBatch: 2 });
        const p = model.tokenizeSync('Once upon a time', true, false);
        const s = ctx.createSampler({ temperature: 0 });
        const step = () => ctx.step({ tokens: Int32Array.from(p), pos: Int32Array.from(p, (_, i) => i), seq: new Int32Array(p.length),
          logits: Uint8Array.from(p, (_, i) => (i === p.length - 1 ? 1 : 0)) }, [{ index: p.length - 1, sampler: s }]);
        const idle = [];
        for (let i = 0; i < 8; i++) {
          const r = await step();
          if (r.status !== 0) throw new Error('step status ' + r.status);
          ctx.seqRemove(0, -1, -1);
          const before = process.cpuUsage();
          await new Promise((resolve) => setTimeout(resolve, 30));
          const d = process.cpuUsage(before);
          idle.push(d.user + d.system);
        }
        console.log(JSON.stringify(idle));
        process.exit(0);
      })().catch((e) => { console.error(e); process.exit(1); });`;
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60_000 });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    // Microseconds of the whole process's CPU in the 30 ms after each step; the
    // first (module warm-up) is left out, the median judged (one busy moment of
    // a shared machine is not the engine).
    const idle = (JSON.parse(r.stdout.trim()) as number[]).slice(1).sort((a, b) => a - b);
    expect(idle[idle.length >> 1]).toBeLessThan(2000);
  });
});
