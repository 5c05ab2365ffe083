import { Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { CatalogEntry } from '../../../store/src/catalog';
import { InferenceBackend } from '../backend/inference-backend';
import { NativeModel } from '../backend/native-addon';
import { ContextRegistry } from '../contexts/context-registry';
import { InvalidRequestError } from '../core/errors';
import { EngineConfig } from '../engine-config';
import { Scheduler } from '../scheduler/scheduler';
import { SchedulerOptions } from '../scheduler/scheduler-options';
import { useBackendSampling } from './backend-sampling';
import { sha256File } from './file-hash';
import { warmGraphSamplers } from './graph-sampler-warmup';
import { hugePagesLine, useHugePages } from './huge-pages';
import { KeptContexts, spillRoot } from './kept-contexts';
import { LoadedModel } from './loaded-model';
import { loadProjector } from './projector-loader';

/** Per-request positions when the flag leaves it open. */
export const DEFAULT_CTX_CAP = 4096;

export interface LoaderDeps {
  backend: InferenceBackend;
  config: EngineConfig;
  /** Contexts an earlier unload of the same file left on disk: the new load adopts them. */
  kept: KeptContexts;
  log: Logger;
  /** Memory the model is counted for against -memory-budget. */
  estimate: (entry: CatalogEntry) => number;
}

/**
 * Loads one model file and builds what serves it: the KV context sized from the flags, its
 * scheduler and context registry (adopting contexts kept on disk). ModelManager decides when.
 */
export async function loadModel(entry: CatalogEntry, deps: LoaderDeps): Promise<LoadedModel> {
  const { backend, config: c } = deps;
  if (entry.capabilities.length === 0) {
    throw new InvalidRequestError(`${entry.name} is not a model this server can run (no text capabilities)`);
  }
  const started = performance.now();
  const hugePages = useHugePages({
    mode: c.hugePages,
    weightsOnCpu: backend.name === 'cpu' || c.gpuLayers === 0,
    fileBytes: entry.sizeBytes,
  });
  const [loaded, hashed] = await Promise.allSettled([backend.loadModel(entry.path, { nGpuLayers: c.gpuLayers, hugePages }), sha256File(entry.path)]);
  if (loaded.status === 'rejected') throw loaded.reason;
  const native = loaded.value;
  // A load that fails past this point frees what it took (the weights stayed until garbage collection).
  try {
    if (hashed.status === 'rejected') throw hashed.reason;
    return await serve(entry, native, hashed.value, deps, started);
  } catch (err) {
    native.dispose();
    throw err;
  }
}

/** The KV context, scheduler and context registry over loaded weights. */
async function serve(entry: CatalogEntry, native: NativeModel, hash: string, deps: LoaderDeps, started: number): Promise<LoadedModel> {
  const { backend, config: c, kept, log } = deps;
  const nCtxSeq = Math.min(native.info.nCtxTrain || DEFAULT_CTX_CAP, c.ctxSize > 0 ? c.ctxSize : DEFAULT_CTX_CAP);
  // Past the trained context a model's positions mean nothing it learned: held to it, said so.
  if (native.info.nCtxTrain && c.ctxSize > nCtxSeq) log.warn(`-ctx-size ${c.ctxSize} is above what ${entry.name} was trained on: ${nCtxSeq} positions per request`);
  // Every sequence id llama.cpp allows: running requests, retained prompts and contexts share them.
  const nSeqMax = 256;
  // Every id running requests and retained prompts cycle through keeps its chain
  // (a dropped one is set up again on its next use), with room to spare; each bound
  // chain adds to llama.cpp's graph node budget.
  const graphSamplerSlots = Math.min(nSeqMax, 2 * (c.concurrency + c.cacheSlots) + 16);
  // llama-server's split: one step takes up to batchSize prompt tokens, computed 512 at a time.
  const nUbatch = Math.min(c.batchSize, 512);
  // Room for every active sequence at full length; retained prompts use what is left.
  const ctx = await native.createContext({
    nCtx: nCtxSeq * c.concurrency,
    nBatch: c.batchSize,
    nUbatch,
    nSeqMax,
    nThreads: c.threads,
    nThreadsBatch: c.threadsBatch,
    flashAttn: c.flashAttn,
    // Only beside weights that went on huge pages (-huge-pages on with a model too
    // small for them leaves its buffers as they were too).
    hugePages: native.info.hugePages.advisedBytes > 0,
    backendSampling: useBackendSampling({
      mode: c.backendSampling,
      backend: backend.name,
      gpuLayers: c.gpuLayers,
      nLayer: native.info.nLayer,
      nVocab: native.info.nVocab,
    }),
    graphSamplerSlots,
  });
  try {
    // Plans llama.cpp's graphs for the chains now rather than on the first requests.
    let warmChains = 0;
    if (ctx.backendSampling && entry.capabilities.some((x) => x === 'chat' || x === 'completion')) {
      const token = native.info.bos >= 0 ? native.info.bos : 0;
      warmChains = await warmGraphSamplers(ctx, graphSamplerSlots, Math.min(c.concurrency, c.batchSize), token).catch((e: Error) => {
        log.warn(`graph sampler warm-up failed (the first requests plan instead): ${e.message}`);
        return 0;
      });
    }
    // JS work beside a running decode is free when the model runs on a GPU or the
    // decode threads leave a CPU free; otherwise it takes a CPU from a decode thread
    // (measured: streaming chains with -threads = CPUs decode slower).
    const kvOnDevice = backend.name !== 'cpu' && c.gpuLayers !== 0;
    const jsHasACpu = kvOnDevice || c.threads < availableParallelism();
    const scheduler = new Scheduler(native, ctx, {
      concurrency: c.concurrency,
      queueLimit: c.queueLimit,
      nBatch: c.batchSize,
      nCtxSeq,
      cacheSlots: c.cacheSlots,
      cachePositions: Math.max(nCtxSeq, Math.floor((nCtxSeq * c.concurrency) / 2)),
      cacheHostBytes: c.cacheRamMiB * 1024 * 1024,
      kvOnDevice,
      ...decodeTuning(jsHasACpu),
    });
    const ms = performance.now() - started;
    log.log(`loaded ${entry.name} (${native.info.description}) on ${backend.name} in ${ms.toFixed(0)} ms; ${nCtxSeq} positions per request${ctx.backendSampling ? `; sampling in the compute graph (${warmChains} chains planned at load)` : ''}`);
    if (native.info.hugePages.advisedBytes > 0 || native.info.hugePages.error) log.log(hugePagesLine(native.info.hugePages, ctx.hugePages));
    // Per file and weights: two names of one blob are one load, but a copy at another path (the
    // -m file and its copy in the store) is another load whose context ids would collide.
    const spillDir = join(spillRoot(), 'spill', createHash('sha256').update(`${entry.path}\0${hash}`).digest('hex').slice(0, 16));
    const contexts = new ContextRegistry(native, ctx, scheduler, spillDir, Math.max(1, Math.min(c.contextSlots, nSeqMax - c.concurrency - c.cacheSlots)));
    await kept.adoptInto(entry.path, contexts);
    const lm = new LoadedModel(entry, native, ctx, scheduler, contexts, hash, ms, new Date());
    lm.estimatedBytes = deps.estimate(entry);
    if (entry.projector) {
      const p = await loadProjector(entry, native, c.threads, nUbatch, c.batchSize, log);
      lm.projector = p.projector;
      lm.visionRefusal = p.refusal;
    }
    return lm;
  } catch (err) {
    ctx.dispose();
    throw err;
  }
}

/**
 * How decoding batches meet JS (see SchedulerOptions): streaming chains when JS has
 * a CPU of its own, plain chains otherwise; the environment's tuning knobs (not
 * flags) override each.
 */
export function decodeTuning(jsHasACpu: boolean, env: NodeJS.ProcessEnv = process.env): Pick<SchedulerOptions, 'pipeline' | 'chainSteps' | 'chainMs' | 'streamMs'> {
  return {
    pipeline: env.SVC_PIPELINE ? env.SVC_PIPELINE === '1' : jsHasACpu,
    chainSteps: envInt('SVC_CHAIN_STEPS', env),
    chainMs: envInt('SVC_CHAIN_MS', env) ?? (jsHasACpu ? undefined : SHARED_CPU_CHAIN_MS),
    // SVC_STREAM_MS=-1 turns streaming chains off, N (ms) on.
    streamMs: env.SVC_STREAM_MS !== undefined ? Number(env.SVC_STREAM_MS) : jsHasACpu ? DEFAULT_STREAM_MS : -1,
  };
}

/**
 * Chain length (ms) when decode threads take every CPU: JS cannot run beside a step
 * there (no pipelining, no streaming chains), so each chain ends in a JS round trip
 * (~0.9 ms per token for the 0.5B model on 2 vCPUs, 3 % of its decode rate, with
 * the usual 24 ms: one 30 ms step per chain); 100 ms cuts that to a third, tokens
 * then arriving in bursts of up to that long. New requests still end a chain at once.
 */
const SHARED_CPU_CHAIN_MS = 100;

/** Streaming chains hand tokens to JS at most this often (ms); see SchedulerOptions.streamMs. */
const DEFAULT_STREAM_MS = 2;

function envInt(name: string, env: NodeJS.ProcessEnv = process.env): number | undefined {
  const v = Number(env[name]);
  return env[name] !== undefined && Number.isInteger(v) && v > 0 ? v : undefined;
}
