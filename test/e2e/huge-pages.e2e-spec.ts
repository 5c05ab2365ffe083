import { spawnSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { NativeHugePages } from '../../libs/engine/src/backend/native-addon';
import { thpUsable } from '../../libs/engine/src/models/huge-pages';
import { fixtureModel, ROOT, STORIES, syntheticModel } from './helpers/fixtures';
import { RunningServer, startServer } from './helpers/server';

/**
 * Weights, KV cache and compute buffers on 2 MiB pages (-huge-pages, default auto on
 * the CPU backend). What the kernel really backs with huge pages is read from
 * /proc/<pid>/smaps_rollup; it needs transparent huge pages set to always or madvise,
 * which the assertions on AnonHugePages follow.
 */
const thpSetting = (() => {
  try {
    return readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8');
  } catch {
    return null;
  }
})();
const thp = thpUsable(thpSetting);
// Under "always" the kernel backs any large anonymous memory with huge pages unasked, so
// what stays on small pages without the advice is only checked under "madvise".
const thpOnlyAdvised = thp && /\[madvise\]/.test(thpSetting!);

function anonHugeBytes(pid: number | 'self'): number {
  const m = /AnonHugePages:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
  return Number(m![1]) * 1024;
}

describe('huge pages (synthetic qwen2-tiny)', () => {
  let model: string;
  let fileBytes: number;

  beforeAll(() => {
    model = syntheticModel('qwen2-tiny');
    fileBytes = statSync(model).size;
  }, 600_000);

  describe('the engine', () => {
    const addon = join(ROOT, 'build', 'native', 'cpu', 'svc_engine.node');
    // One fresh process per load, so its AnonHugePages starts from the runtime alone.
    const run = (hugePages: boolean) => {
      const script = `
        const fs = require('node:fs');
        const addon = require(${JSON.stringify(addon)});
        const huge = () => Number(/AnonHugePages:\\s+(\\d+) kB/.exec(fs.readFileSync('/proc/self/smaps_rollup', 'utf8'))[1]) * 1024;
        (async () => {
          const before = huge();
          const model = await addon.loadModel(${JSON.stringify(model)}, { hugePages: ${hugePages} });
          const ctx = await model.createContext({ nCtx: 1024, nBatch: 512, nUbatch: 512, nSeqMax: 2, nThreads: 2, nThreadsBatch: 2, hugePages: ${hugePages} });
          const s = ctx.createSampler({ temperature: 0 });
          let toks = Array.from(model.tokenizeSync('Once upon a time', true, false));
          const out = [];
          for (let pos = 0, i = 0; i < 16; i++) {
            const r = await ctx.step({ tokens: Int32Array.from(toks), pos: Int32Array.from(toks, (_, k) => pos + k), seq: new Int32Array(toks.length),
              logits: Uint8Array.from(toks, (_, k) => (k === toks.length - 1 ? 1 : 0)) }, [{ index: toks.length - 1, sampler: s }]);
            if (r.status !== 0) throw new Error('step status ' + r.status);
            pos += toks.length;
            toks = [r.tokens[0]];
            out.push(r.tokens[0]);
          }
          console.log(JSON.stringify({ out, weights: model.info.hugePages, kv: ctx.hugePages, gained: huge() - before }));
          process.exit(0);
        })().catch((e) => { console.error(e); process.exit(1); });`;
      const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 120_000 });
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
      return JSON.parse(r.stdout.trim()) as {
        out: number[];
        weights: NativeHugePages;
        kv: NativeHugePages;
        gained: number;
      };
    };

    it('reads the weights onto huge pages and decodes exactly what the mapped file decodes', () => {
      const mapped = run(false);
      const huge = run(true);
      expect(huge.out).toEqual(mapped.out);
      expect(mapped.weights.advisedBytes).toBe(0);
      expect(mapped.kv.advisedBytes).toBe(0);
      // Advice never fails; moving pages already in use may (no huge page free at that moment).
      expect(huge.weights.error).toBeNull();
      expect(huge.kv.error).toBeNull();
      // The weights take nearly the whole file; each of their buffers loses up to a 2 MiB block at
      // either end. Other large memory the loader allocates by then (vocabulary tables) is advised too.
      expect(huge.weights.advisedBytes).toBeGreaterThan(fileBytes * 0.6);
      expect(huge.weights.advisedBytes).toBeLessThan(fileBytes * 1.5);
      expect(huge.kv.advisedBytes).toBeGreaterThan(0);
      if (thp) {
        expect(huge.gained).toBeGreaterThan(huge.weights.advisedBytes * 0.5);
        if (thpOnlyAdvised) expect(mapped.gained).toBeLessThan(huge.weights.advisedBytes * 0.5);
      }
    });
  });

  describe('the server', () => {
    const servers: RunningServer[] = [];
    afterAll(async () => {
      await Promise.all(servers.map((s) => s.stop()));
    });

    async function complete(srv: RunningServer): Promise<string> {
      const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x' });
      const r = await client.completions.create({ model: '', prompt: 'Once upon a time', max_tokens: 24, temperature: 0 });
      return r.choices[0].text;
    }

    it('-huge-pages auto (the default) on the CPU backend; off maps the file as before', async () => {
      const auto = await startServer(['-m', model, '-threads', '2']);
      servers.push(auto);
      const off = await startServer(['-m', model, '-threads', '2', '-huge-pages', 'off']);
      servers.push(off);
      const [a, o] = [await complete(auto), await complete(off)];
      expect(a).toBe(o);
      expect(off.logs()).not.toMatch(/2 MiB pages/);
      if (!thp) {
        expect(auto.logs()).not.toMatch(/2 MiB pages/);
        return;
      }
      const line = /2 MiB pages: (\d+) MiB of weights; (\d+) MiB of KV cache/.exec(auto.logs());
      expect(line).not.toBeNull();
      expect(Number(line![1]) * (1 << 20)).toBeGreaterThan(fileBytes * 0.6);
      expect(anonHugeBytes(auto.proc.pid!)).toBeGreaterThan(fileBytes * 0.5);
      if (thpOnlyAdvised) expect(anonHugeBytes(off.proc.pid!)).toBeLessThan(fileBytes * 0.5);
    }, 120_000);

    it('leaves a model too small for it (stories260K) and its buffers on small pages', async () => {
      const srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '2']);
      servers.push(srv);
      expect(await complete(srv)).not.toBe('');
      expect(srv.logs()).toMatch(/loaded stories260K/);
      expect(srv.logs()).not.toMatch(/2 MiB pages/);
      if (thpOnlyAdvised) expect(anonHugeBytes(srv.proc.pid!)).toBeLessThan(8 << 20);
    }, 60_000);
  });
});
