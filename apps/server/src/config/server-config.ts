import { accessSync, closeSync, constants, existsSync, openSync, readSync, statSync } from 'node:fs';
import { homedir, availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { defaultEngineConfig, EngineConfig } from '../../../../libs/engine/src/engine-config';
import { parseBytes, parseKeepAlive } from '../../../../libs/engine/src/models/residency';
import { FlagError, FlagValues } from './flags';
import { capabilitiesOf, readGgufMetadata } from '../../../../libs/store/src/gguf-metadata';
import { AuthConfig, buildAuthConfig } from '../../../../libs/auth/src/auth-config';

export const SERVER_CONFIG = Symbol('SERVER_CONFIG');
export const VERSION = '0.3.0';
/** JSON bodies above this answer 413 (spec: 32 MiB). */
export const BODY_LIMIT = 32 * 1024 * 1024;

/** One typed config, made once at boot from the flags. */
export interface ServerConfig {
  host: string;
  port: number;
  defaultModel?: string;
  /** -mmproj: the vision projector loaded beside -m's model. */
  projector?: string;
  storeDir: string;
  backend: 'auto' | 'cpu' | 'cuda' | 'metal';
  logLevel: 'error' | 'warn' | 'log' | 'debug';
  engine: EngineConfig;
  pull: boolean;
  cors: string[];
  apiKeys: string[];
  tlsCert?: string;
  tlsKey?: string;
  /** Authentication, markings, origins and client certificates (libs/auth). */
  auth: AuthConfig;
  /** The spec's feature flags (and the paths they read). */
  features: {
    embed?: string;
    whisper: boolean;
    /** The whisper.cpp model file -whisper serves. */
    whisperModel: string;
    rerank?: string;
    index: boolean;
    /** The documents -index serves (and svc's index file, in its .svc-index folder). */
    indexDir: string;
    studio: boolean;
    studioExec: boolean;
    classification: boolean;
    contextKey?: string;
    profile?: string;
    allowLegacySnapshots: boolean;
    lexicon?: string;
  };
}

export function buildConfig(f: FlagValues): ServerConfig {
  const [host, port] = parseAddr(String(f.addr ?? '127.0.0.1:11435'));
  const engine = defaultEngineConfig(availableParallelism());
  const int = (k: string, min: number, max: number): number | undefined => {
    const v = f[k] as number | undefined;
    if (v === undefined) return undefined;
    if (v < min || v > max) throw new FlagError(`flag -${k} must be between ${min} and ${max}, got ${v}`);
    return v;
  };
  engine.concurrency = int('concurrency', 1, 128) ?? engine.concurrency;
  engine.queueLimit = int('queue', 0, 100000) ?? engine.queueLimit;
  engine.threads = int('threads', 1, 1024) ?? engine.threads;
  engine.threadsBatch = int('threads-batch', 1, 1024) ?? engine.threads;
  engine.ctxSize = int('ctx-size', 0, 1 << 20) ?? engine.ctxSize;
  engine.batchSize = int('batch-size', 1, 1 << 16) ?? engine.batchSize;
  engine.gpuLayers = int('gpu-layers', -1, 10000) ?? engine.gpuLayers;
  engine.cacheSlots = int('cache-slots', 0, 128) ?? engine.cacheSlots;
  engine.cacheRamMiB = int('cache-ram', 0, 1 << 24) ?? engine.cacheRamMiB;
  engine.contextSlots = int('context-slots', 1, 250) ?? engine.contextSlots;
  if (f['memory-budget'] !== undefined) {
    try {
      engine.memoryBudget = parseBytes(String(f['memory-budget']));
    } catch (err) {
      throw new FlagError(`flag -memory-budget: ${(err as Error).message}`);
    }
  }
  if (f['keep-alive'] !== undefined) {
    try {
      engine.keepAliveMs = parseKeepAlive(String(f['keep-alive']));
    } catch (err) {
      throw new FlagError(`flag -keep-alive: ${(err as Error).message}`);
    }
  }
  engine.flashAttn = oneOf(f, 'flash-attn', ['auto', 'on', 'off'] as const) ?? 'auto';
  engine.hugePages = oneOf(f, 'huge-pages', ['auto', 'on', 'off'] as const) ?? 'auto';
  engine.backendSampling = oneOf(f, 'backend-sampling', ['auto', 'on', 'off'] as const) ?? 'auto';
  const backend = oneOf(f, 'backend', ['auto', 'cpu', 'cuda', 'metal'] as const) ?? 'auto';
  const logLevel = oneOf(f, 'log-level', ['error', 'warn', 'log', 'debug'] as const) ?? 'log';
  const profile = oneOf(f, 'profile', ['default', 'enterprise'] as const);
  if (f['tls-key'] && !f['tls-cert']) throw new FlagError('flag -tls-key needs -tls-cert');
  const auth = buildAuthConfig(f);
  return {
    host,
    port,
    defaultModel: f.m as string | undefined,
    projector: f.mmproj as string | undefined,
    storeDir: resolve(String(f.store ?? join(homedir(), '.svc', 'models'))),
    backend,
    logLevel,
    engine,
    pull: f.pull !== false,
    cors: (f.cors as string[] | undefined) ?? [],
    apiKeys: (f['api-key'] as string[] | undefined) ?? [],
    tlsCert: f['tls-cert'] as string | undefined,
    tlsKey: f['tls-key'] as string | undefined,
    auth,
    features: {
      embed: f.embed as string | undefined,
      whisper: f.whisper === true,
      whisperModel: resolve(String(f['whisper-model'] ?? join(homedir(), '.svc', 'whisper', 'ggml-base.bin'))),
      rerank: f.rerank as string | undefined,
      index: f.index === true,
      indexDir: resolve(String(f['index-dir'] ?? join(homedir(), '.svc', 'index'))),
      studio: f.studio === true,
      studioExec: f['studio-exec'] === true,
      classification: auth.classification.enabled,
      contextKey: f['context-key'] as string | undefined,
      profile,
      allowLegacySnapshots: f['allow-legacy-snapshots'] === true,
      lexicon: f.lexicon as string | undefined,
    },
  };
}

function oneOf<T extends string>(f: FlagValues, k: string, allowed: readonly T[]): T | undefined {
  const v = f[k] as string | undefined;
  if (v === undefined) return undefined;
  if (!allowed.includes(v as T)) throw new FlagError(`flag -${k} must be one of ${allowed.join(', ')}, got "${v}"`);
  return v as T;
}

function parseAddr(addr: string): [string, number] {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(addr);
  if (!m) throw new FlagError(`flag -addr wants host:port, got "${addr}"`);
  const port = Number(m[3]);
  if (port > 65535) throw new FlagError(`flag -addr port out of range: ${port}`);
  return [m[1] ?? (m[2] || '0.0.0.0'), port];
}

/**
 * At startup (not in buildConfig, which also checks manifests written for another machine's
 * files): a -m, -embed or -rerank that names nothing the server could load is a mistake to say at
 * once (exit 2), not a server that runs and fails every request: a path to no file, a folder or a
 * file that is no GGUF model. Store names (`qwen2.5:0.5b`, `hf.co/org/repo:tag`) neither end in
 * .gguf nor start with / or ./.
 */
export function checkModelFlags(config: ServerConfig): void {
  for (const [flag, m] of [['m', config.defaultModel], ['embed', config.features.embed], ['rerank', config.features.rerank]] as const) {
    if (m === undefined) continue;
    const looksLikePath = /\.gguf$/i.test(m) || /^(\/|\.\.?\/)/.test(m);
    if (looksLikePath && !existsSync(m)) throw new FlagError(`flag -${flag}: no model file at ${m}`);
    // What the catalog reads as a file path (catalog.ts isFilePath). A store name is looked up at
    // each request instead: a server may start before its model is pulled.
    const isFile = (m.includes('/') || m.endsWith('.gguf')) && existsSync(m);
    const problem = isFile ? notAModelFile(m) : undefined;
    if (problem) throw new FlagError(`flag -${flag}: ${m} ${problem}`);
    // An encoder's flag naming a text generator booted, then refused every embedding.
    if (isFile && flag !== 'm') {
      const caps = capabilitiesOf(readGgufMetadata(m));
      if (caps.length > 0 && !caps.includes('embeddings')) throw new FlagError(`flag -${flag}: ${m} is a model that generates text, not an encoder (serve it with -m)`);
    }
  }
}

/**
 * -mmproj: a projector file for -m's model, said wrong at once (exit 2): no -m, no such file, not
 * a projector (a GGUF whose architecture is clip), or (with -m a file) a projection width that is
 * not the model's embedding width. The load checks it again (libmtmd), also for a store model.
 */
export function checkProjectorFlag(config: ServerConfig): void {
  const p = config.projector;
  if (p === undefined) return;
  if (!config.defaultModel) throw new FlagError('flag -mmproj needs -m: the projector goes with the default model');
  if (!existsSync(p)) throw new FlagError(`flag -mmproj: no projector file at ${p}`);
  const problem = notAModelFile(p);
  if (problem) throw new FlagError(`flag -mmproj: ${p} ${problem}`);
  const kv = readGgufMetadata(p)?.kv ?? {};
  if (kv['general.architecture'] !== 'clip' || kv['clip.has_vision_encoder'] === false) {
    throw new FlagError(`flag -mmproj: ${p} is not a vision projector (its architecture is ${String(kv['general.architecture'] ?? 'unknown')}, not clip)`);
  }
  const m = config.defaultModel;
  if (!((m.includes('/') || m.endsWith('.gguf')) && existsSync(m))) return;
  const mkv = readGgufMetadata(m)?.kv ?? {};
  const width = mkv[`${String(mkv['general.architecture'])}.embedding_length`];
  const out = kv['clip.vision.projection_dim'];
  if (typeof width === 'number' && typeof out === 'number' && width !== out) {
    throw new FlagError(`flag -mmproj: ${p} writes ${out}-wide embeddings, and ${m} reads ${width}: the projector belongs to another model`);
  }
}

/** Why a file cannot be a model the engine loads (undefined when it starts as a GGUF file does). */
function notAModelFile(path: string): string | undefined {
  let fd: number | undefined;
  try {
    if (statSync(path).isDirectory()) return 'is a folder, not a model file';
    fd = openSync(path, 'r');
    const magic = Buffer.alloc(4);
    const n = readSync(fd, magic, 0, 4, 0);
    return n === 4 && magic.toString('latin1') === 'GGUF' ? undefined : 'is not a GGUF model file';
  } catch (err) {
    return `cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** -whisper without a model to serve is a startup error (exit 2), not a server whose audio routes all fail. */
export function checkWhisperModel(config: ServerConfig): void {
  if (!config.features.whisper) return;
  const path = config.features.whisperModel;
  try {
    accessSync(path, constants.R_OK);
    if (statSync(path).isDirectory()) throw new Error('a folder, not a file');
  } catch (err) {
    throw new FlagError(`flag -whisper needs a whisper.cpp model: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); name one with -whisper-model`);
  }
}

/**
 * Files the boot reads: one that cannot be read is a startup error naming its flag (exit 2), not
 * a stack trace from the boot (exit 1). Apart from buildConfig, which also checks a pod's flags
 * where those files do not exist (test/deploy).
 */
export function checkFlagFiles(f: FlagValues): void {
  for (const k of ['tls-cert', 'tls-key', 'tls-client-ca', 'lexicon']) {
    const path = f[k] as string | undefined;
    if (path === undefined || path === '') continue;
    try {
      accessSync(path, constants.R_OK);
      // A pipe (-tls-key <(vault read ...), /dev/stdin) reads as well as a file; a folder does not.
      if (statSync(path).isDirectory()) throw new Error('a folder, not a file');
    } catch (err) {
      throw new FlagError(`flag -${k}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  }
}
