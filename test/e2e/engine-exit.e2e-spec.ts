import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT, fixtureModel, STORIES } from './helpers/fixtures';

/**
 * A process that exits with engine objects never disposed (a script, a crash
 * path, process.exit) must exit normally: Node finalizes the engine threads'
 * thread-safe functions itself during teardown, and releasing one after that
 * aborted the process (exit 134) as soon as a model had two contexts.
 */
describe('engine objects at process exit', () => {
  const addon = join(ROOT, 'build', 'native', 'cpu', 'svc_engine.node');

  function runScript(body: string) {
    const script = `
      const addon = require(${JSON.stringify(addon)});
      (async () => {
        const model = await addon.loadModel(${JSON.stringify(fixtureModel(STORIES))});
        const opts = { nCtx: 1024, nBatch: 512, nUbatch: 512, nSeqMax: 4, nThreads: 1, nThreadsBatch: 1 };
        ${body}
        console.log('end');
      })();`;
    return spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60_000 });
  }

  it.each([
    ['two contexts, neither disposed', `await model.createContext(opts); await model.createContext(opts);`],
    [
      'two contexts after a decode, then process.exit',
      `const a = await model.createContext(opts); await model.createContext(opts);
       const p = model.tokenizeSync('Once upon a time', true, false);
       const s = a.createSampler({ temperature: 0 });
       await a.step({ tokens: Int32Array.from(p), pos: Int32Array.from(p, (_, i) => i), seq: new Int32Array(p.length),
                      logits: Uint8Array.from(p, (_, i) => (i === p.length - 1 ? 1 : 0)) }, [{ index: p.length - 1, sampler: s }]);
       console.log('end'); process.exit(0);`,
    ],
  ])('%s: exit code 0', (_name, body) => {
    const r = runScript(body);
    expect({ status: r.status, signal: r.signal, stderr: r.stderr }).toEqual({ status: 0, signal: null, stderr: '' });
    expect(r.stdout).toContain('end');
  });
});
