/** Every startup flag: the spec's, and svc's own (tuning, auth, paths). */
export type FlagKind = 'string' | 'bool' | 'int' | 'list';

export interface FlagDef {
  name: string;
  kind: FlagKind;
  help: string;
  aliases?: string[];
  /** Environment variable read when the flag is absent. */
  env?: string;
  /**
   * A list whose items may hold commas (API keys): each -flag value is one item, taken whole,
   * and an empty one is refused (a blank key left the server open). Only the environment
   * variable's value is split on commas, as the deployment's secret holds several.
   */
  wholeItems?: boolean;
}

export const FLAGS: FlagDef[] = [
  { name: 'm', kind: 'string', help: 'default model: a GGUF path or a store name', env: 'SVC_MODEL' },
  { name: 'mmproj', kind: 'string', help: "vision projector (mmproj GGUF) for -m's model: chat requests may then carry images", env: 'SVC_MMPROJ' },
  { name: 'addr', kind: 'string', help: 'listen address host:port (default 127.0.0.1:11435)', env: 'SVC_ADDR' },
  { name: 'store', kind: 'string', help: "svc's own model store (default ~/.svc/models)", env: 'SVC_STORE' },
  { name: 'concurrency', kind: 'int', help: 'sequences generating at once (default 4)', aliases: ['conc'], env: 'SVC_CONCURRENCY' },
  { name: 'queue', kind: 'int', help: 'requests waiting beyond -concurrency before 429 (default 64)' },
  { name: 'threads', kind: 'int', help: 'CPU threads for decoding (default: all cores)', env: 'SVC_THREADS' },
  { name: 'threads-batch', kind: 'int', help: 'CPU threads for prompt batches (default: -threads)' },
  { name: 'ctx-size', kind: 'int', help: 'positions per request (default: the model\'s, at most 4096)', aliases: ['c'] },
  { name: 'batch-size', kind: 'int', help: 'tokens per decode step (default 2048, computed in micro-batches of at most 512)', aliases: ['b'] },
  { name: 'gpu-layers', kind: 'int', help: 'layers offloaded to the GPU (default all; 0 = none)', aliases: ['ngl'] },
  { name: 'backend', kind: 'string', help: 'auto, cpu, cuda or metal (default auto)', env: 'SVC_BACKEND' },
  { name: 'flash-attn', kind: 'string', help: 'auto, on or off (default auto)', aliases: ['fa'] },
  { name: 'huge-pages', kind: 'string', help: 'weights and KV cache on 2 MiB pages: auto, on or off (default auto: CPU models from 32 MiB to half the memory, Linux)', env: 'SVC_HUGE_PAGES' },
  { name: 'backend-sampling', kind: 'string', help: 'sample in the compute graph: auto, on or off (default auto: every layer on a CUDA GPU and a vocabulary of 32000+ tokens)', env: 'SVC_BACKEND_SAMPLING' },
  { name: 'cache-slots', kind: 'int', help: 'retained prompts kept for prefix reuse (default 8)' },
  { name: 'cache-ram', kind: 'int', help: 'MiB of host memory for retained prompts moved out of the KV cache while others decode (default 4096; 0 = drop them)' },
  { name: 'context-slots', kind: 'int', help: 'KV contexts kept in memory at once; idle ones beyond it are spilled to disk (default 128)' },
  { name: 'memory-budget', kind: 'string', help: 'memory resident models may use, e.g. 8GiB (default: total memory, or the container limit where lower, minus 2 GiB)', env: 'SVC_MEMORY_BUDGET' },
  { name: 'keep-alive', kind: 'string', help: 'how long a model stays loaded after a local-runner request that sends no keep_alive (or a /v1 request that loaded it), e.g. 30m; -1 = forever, 0 = unload at once (default 5m)', env: 'SVC_KEEP_ALIVE' },
  { name: 'log-level', kind: 'string', help: 'error, warn, log, debug (default log)', env: 'SVC_LOG_LEVEL' },
  { name: 'lexicon', kind: 'string', help: 'word list (one word a line) for svc_lexicon and svc_lexicon_strict' },
  // The spec's feature flags.
  { name: 'embed', kind: 'string', help: 'encoder for /v1/embeddings, /api/embed and /api/embeddings (GGUF path or store name)' },
  { name: 'whisper', kind: 'bool', help: 'enable speech-to-text routes (/v1/audio/transcriptions, /v1/audio/translations) with -whisper-model' },
  { name: 'whisper-model', kind: 'string', help: 'the whisper.cpp model (ggml .bin) -whisper serves (default ~/.svc/whisper/ggml-base.bin)', env: 'SVC_WHISPER_MODEL' },
  { name: 'rerank', kind: 'string', help: 'reranker model for the rerank routes' },
  { name: 'index', kind: 'bool', help: 'with -embed, enable /v1/retrieve over the documents in -index-dir' },
  { name: 'index-dir', kind: 'string', help: 'the folder of documents -index serves, with its labels.json (default ~/.svc/index)', env: 'SVC_INDEX_DIR' },
  { name: 'studio', kind: 'bool', help: 'enable the local studio page' },
  { name: 'studio-exec', kind: 'bool', help: 'allow command execution from the studio page' },
  { name: 'pull', kind: 'bool', help: 'model-store routes (default true; -pull=false answers 501)' },
  { name: 'cors', kind: 'list', help: 'permit this web origin (repeatable)' },
  { name: 'tls-cert', kind: 'string', help: 'serve HTTPS with this certificate (PEM); svc pull: the server\'s certificate or its CA, to reach it over HTTPS' },
  { name: 'tls-key', kind: 'string', help: 'private key for -tls-cert (PEM)' },
  { name: 'classification', kind: 'bool', help: 'enforce classification markings' },
  { name: 'context-key', kind: 'string', help: 'seal snapshot and export files with this key', env: 'SVC_CONTEXT_KEY' },
  { name: 'profile', kind: 'string', help: 'enterprise: the stricter profile' },
  { name: 'allow-legacy-snapshots', kind: 'bool', help: 'accept snapshots from before 0.3.0' },
  { name: 'api-key', kind: 'list', help: 'accept this API key (repeatable; $SVC_API_KEY holds comma-separated keys); svc pull sends the first', env: 'SVC_API_KEY', wholeItems: true },
  // Authentication, markings and TLS client certificates (libs/auth/README.md).
  { name: 'callers', kind: 'string', help: 'callers file (JSON or YAML): named callers, key hashes, clearances' },
  { name: 'oidc-issuer', kind: 'string', help: 'accept bearer JWTs from this directory issuer' },
  { name: 'oidc-audience', kind: 'string', help: 'required audience of directory tokens' },
  { name: 'oidc-jwks', kind: 'string', help: "the issuer's JWKS URL (default: discovery, else <issuer>/.well-known/jwks.json)" },
  { name: 'oidc-name-claim', kind: 'string', help: 'token claim naming the caller (default sub)' },
  { name: 'oidc-clearance-claim', kind: 'string', help: "token claim holding the caller's clearance level" },
  { name: 'oidc-compartments-claim', kind: 'string', help: "token claim holding the caller's compartments" },
  { name: 'tls-client-ca', kind: 'string', help: 'require client certificates signed by this CA (PEM); needs -tls-cert' },
  { name: 'classification-levels', kind: 'string', help: 'marking levels, lowest first (default UNCLASSIFIED,CONFIDENTIAL,SECRET,TOP SECRET)' },
  { name: 'require-classification', kind: 'bool', help: 'with -classification, refuse requests without X-Classification (default true)' },
  { name: 'insecure', kind: 'bool', help: 'allow -profile enterprise to serve plain HTTP' },
  { name: 'help', kind: 'bool', help: 'print this help', aliases: ['h'] },
  { name: 'version', kind: 'bool', help: 'print the version' },
];
