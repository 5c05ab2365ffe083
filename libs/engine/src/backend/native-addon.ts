/**
 * The contract between the TypeScript engine library and the native addon
 * (native/src, compiled per backend: cpu, cuda, metal). Every backend's .node
 * exports exactly this shape; nothing above libs/engine sees it.
 *
 * Threading rule: calls that compute (load, tokenize, step, state reads) run on
 * a worker thread and return promises. The scheduler never issues a KV operation
 * on a context while a step() on it is in flight.
 */

export interface NativeModelInfo {
  architecture: string;
  /** Training context length (n_ctx_train). */
  nCtxTrain: number;
  nEmbd: number;
  nLayer: number;
  nHead: number;
  nHeadKv: number;
  nVocab: number;
  nParams: number;
  /** Bytes of tensor data. */
  sizeBytes: number;
  /** Default chat template from GGUF metadata, or null when the model has none. */
  chatTemplate: string | null;
  bos: number;
  eos: number;
  eot: number;
  addBos: boolean;
  /** Fill-in-the-middle marker tokens, -1 where the vocabulary has none. */
  fimPre: number;
  fimSuf: number;
  fimMid: number;
  hasEncoder: boolean;
  hasDecoder: boolean;
  /** llama_model_desc, e.g. "llama ?B all F32". */
  description: string;
  /** Every GGUF metadata key/value as strings (arrays abbreviated by llama.cpp). */
  metadata: Record<string, string>;
  hugePages: NativeHugePages;
}

export interface NativeLoadOptions {
  /** Layers to offload to the GPU; ignored by the CPU backend. -1 = all. */
  nGpuLayers?: number;
  useMmap?: boolean;
  /** Read the weights into anonymous memory advised onto 2 MiB pages (Linux; implies no mmap). */
  hugePages?: boolean;
}

/** What a load or context creation put on 2 MiB pages (native/src/hugepages.h). */
export interface NativeHugePages {
  /** Bytes advised (MADV_HUGEPAGE) before they were first touched, or collapsed. */
  advisedBytes: number;
  /** Bytes moved onto huge pages at once (MADV_COLLAPSE). */
  collapsedBytes: number;
  /** The first MADV_HUGEPAGE failure, if any; that memory stays on small pages. */
  error: string | null;
  /** The first MADV_COLLAPSE failure (no huge page free then); those blocks stay small for now. */
  collapseError: string | null;
}

export interface NativeContextOptions {
  /** Total KV cells shared by all sequences (kv_unified). */
  nCtx: number;
  nBatch: number;
  nUbatch: number;
  nSeqMax: number;
  nThreads: number;
  nThreadsBatch: number;
  /** 'auto' | 'on' | 'off'; default auto. */
  flashAttn?: 'auto' | 'on' | 'off';
  /** Move the KV cache and compute buffers onto 2 MiB pages (Linux). */
  hugePages?: boolean;
  /**
   * Samplers of this context run in the compute graph where their chain allows
   * (llama.cpp backend sampling; not with a grammar, nor for entries that want
   * top logprobs or logits()).
   */
  backendSampling?: boolean;
  /**
   * Sequences holding a graph sampler chain at once (default 32): each enlarges
   * llama.cpp's worst-case graph; past it the least recently used one is dropped.
   */
  graphSamplerSlots?: number;
}

export interface NativeToolCall {
  id: string;
  name: string;
  arguments: string;
}

export interface NativeParsedMessage {
  content: string;
  reasoningContent: string;
  toolCalls: NativeToolCall[];
}

/** Input of applyChatTemplate, OpenAI-shaped (llama.cpp common's oaicompat parsers read it). */
export interface NativeChatInput {
  messages: unknown[];
  tools?: unknown[];
  /** 'auto' | 'none' | 'required' */
  toolChoice?: string;
  /** The tools as the grammar enforces them, where they differ from `tools` (shown to the model). */
  grammarTools?: unknown[];
  parallelToolCalls?: boolean;
  addGenerationPrompt?: boolean;
  /** Continue the final assistant message instead of opening a new turn (prefill). */
  continueFinalMessage?: boolean;
  /** Template override (Jinja source); empty = the model's own or llama.cpp's fallback. */
  templateOverride?: string;
  jsonSchema?: string;
  grammar?: string;
  /** The template's enable_thinking (default true). */
  enableThinking?: boolean;
  /** Parse the model's thoughts out of the content (llama-server's reasoning_format deepseek; default true). */
  splitReasoning?: boolean;
  /** Extra template variables (llama-server's chat_template_kwargs). */
  templateKwargs?: Record<string, unknown>;
}

/** A rendered chat prompt; keeps llama.cpp's chat params for sampling and parsing. */
export interface NativeChatPrompt {
  readonly prompt: string;
  /** common_chat_format_name of the detected format. */
  readonly format: string;
  readonly grammar: string;
  readonly grammarLazy: boolean;
  readonly additionalStops: string[];
  readonly generationPrompt: string;
  /** The template renders tool definitions (llama.cpp's template capability probe). */
  readonly supportsTools: boolean;
  /** The format has a reasoning block (a think tag, a thought channel) its parser reads. */
  readonly supportsThinking: boolean;
  /** Single tokens the format's markers are made of: shown as text in the output (llama-server's preserved tokens). */
  readonly preservedTokens: Int32Array;
  /** The think block's tags ('' and [] where the format has none). */
  readonly thinkingStartTag: string;
  readonly thinkingEndTags: string[];
  /** What starts a call under the lazy tool grammar (llama.cpp's grammar triggers). */
  readonly callTriggers: ReadonlyArray<{ kind: 'word' | 'pattern' | 'pattern_full' | 'token'; value: string }>;
  /** Parse generated text (partial=true while streaming) into reasoning, content and tool calls. */
  parse(text: string, partial: boolean): NativeParsedMessage;
}

export interface NativeSamplerOptions {
  /** <= 0 means greedy. */
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  typicalP?: number;
  seed?: number;
  repeatPenalty?: number;
  repeatLastN?: number;
  frequencyPenalty?: number;
  presencePenalty?: number;
  /** [token, bias] pairs; bias -Infinity bans the token. */
  logitBias?: Array<[number, number]>;
  dryMultiplier?: number;
  dryBase?: number;
  dryAllowedLength?: number;
  dryPenaltyLastN?: number;
  /** GBNF text; an invalid grammar throws. */
  grammar?: string;
  /** JSON Schema text, converted with llama.cpp's json_schema_to_grammar; invalid throws. */
  jsonSchema?: string;
  /** Use the chat prompt's grammar (tool calls), lazy triggers and preserved tokens. */
  chat?: NativeChatPrompt;
  /** End this chat prompt's think block after thinkingBudget tokens of thought (llama.cpp's budget sampler). */
  thinkingOf?: NativeChatPrompt;
  thinkingBudget?: number;
  ignoreEos?: boolean;
}

export interface NativeSampler {
  /** Feed a prompt token to the penalty history (not the grammar). */
  acceptPrompt(tokens: Int32Array): void;
  /** Back to a new sampler's state (history cleared, RNG reseeded); not for samplers with a grammar. */
  reset(): void;
  dispose(): void;
}

export interface NativeBatch {
  tokens: Int32Array;
  pos: Int32Array;
  seq: Int32Array;
  /** 1 where logits are wanted for that entry. */
  logits: Uint8Array;
}

export interface NativeSampleRequest {
  /** Index into the batch of an entry with logits = 1. */
  index: number;
  sampler: NativeSampler;
  /** 0 = none; else the number of top alternatives (raw logits, log-softmax) to return. */
  topLogprobs: number;
  /** Tokens this sequence may still take (default 1); a chained step stops when one runs out. */
  budget?: number;
  /** An end-of-generation token ends a chained step (default true). */
  stopOnEog?: boolean;
  /** Tokens whose log-probabilities (raw logits, log-softmax) are wanted whatever their rank: `scored` of the result. */
  scoreTokens?: Int32Array;
}

export interface NativeStepOptions {
  /**
   * Up to this many decode+sample steps in one call (default 1), only when the
   * batch holds decoding sequences alone: each further step decodes the tokens
   * just sampled. Ends early on a budget, an end token or requestYield().
   */
  maxSteps?: number;
  /** Start no further chained step once this many milliseconds have passed. */
  maxMs?: number;
  /**
   * Streaming: while a chain runs, hand the steps decoded so far to this
   * callback (on the JS thread) at most every `streamMs` milliseconds; the
   * result then holds only the steps not delivered yet. Without it, the result
   * holds every step.
   */
  onTokens?: (delivered: NativeStepTokens) => void;
  streamMs?: number;
}

/** Steps of a chain: tokens and logprobs laid out steps × sample requests. */
export interface NativeStepTokens {
  steps: number;
  tokens: Int32Array;
  logprobs: Array<NativeTokenLogprob | null>;
  /** Microseconds these steps spent in llama_decode and in sampling. */
  decodeUs: number;
  sampleUs: number;
}

export interface NativeTokenLogprob {
  /** log-softmax of the raw logits for the sampled token. */
  logprob: number;
  /** Best alternatives, sorted by logprob descending: [token, logprob]. */
  top: Array<[number, number]>;
  /** The sample request's scoreTokens' logprobs, in its order (absent when it named none). */
  scored?: Float32Array;
}

export interface NativeStepResult extends NativeStepTokens {
  /** llama_decode's return: 0 ok, 1 no KV slot, negative error. Tokens are empty unless 0. */
  status: number;
  // steps: run and not streamed already (1 unless chained; 0 when status is not 0).
  // tokens: per step, one sampled token per sample request, in order (already accepted).
  // logprobs: same layout; present per sample request that asked for topLogprobs > 0 (null otherwise).
  /** Microseconds the engine thread sat idle before this step began (-1: nothing ran before). */
  idleUs?: number;
}

export interface NativeContext {
  readonly nCtx: number;
  readonly nSeqMax: number;
  readonly nBatch: number;
  readonly hugePages: NativeHugePages;
  readonly backendSampling: boolean;
  createSampler(opts: NativeSamplerOptions): NativeSampler;
  /** Decode one batch and sample the requested entries, all on a worker thread; each entry its own sampler (one named twice throws). */
  step(batch: NativeBatch, samples: NativeSampleRequest[], opts?: NativeStepOptions): Promise<NativeStepResult>;
  /** Ends a chained step after its current decode (new work is waiting). */
  requestYield(): void;
  /** Raw logits of batch entry `index` from the last step (copy). */
  logits(index: number): Float32Array;
  seqRemove(seq: number, p0: number, p1: number): boolean;
  seqCopy(src: number, dst: number, p0: number, p1: number): void;
  seqKeep(seq: number): void;
  seqPosMin(seq: number): number;
  seqPosMax(seq: number): number;
  /** Serialised KV state of one sequence (llama_state_seq_get_data). */
  stateSeqGet(seq: number): Promise<Buffer>;
  /** Load a sequence's state; resolves to bytes read: 0 when refused (by llama.cpp, or a first cell count past the context's positions or the bytes), -1 when the KV cache had no free cells for it. */
  stateSeqSet(seq: number, data: Buffer): Promise<number>;
  /** Drop every sequence's KV. */
  clear(): void;
  /**
   * Encodes one image chunk of a media prompt (the projector's clip model) and decodes its
   * embeddings into `seq` from position nPast, on the engine thread like step(): never while a
   * step or KV operation is in flight. Status 0: done, nPast is the position after the image;
   * 1: no KV cells for it; other: failed (error says why).
   */
  evalMedia(prompt: NativeMediaPrompt, chunkIndex: number, seq: number, nPast: number): Promise<{ status: number; nPast: number; error?: string }>;
  dispose(): void;
}

export interface NativeModel {
  readonly info: NativeModelInfo;
  tokenize(text: string, addSpecial: boolean, parseSpecial: boolean): Promise<Int32Array>;
  tokenizeSync(text: string, addSpecial: boolean, parseSpecial: boolean): Int32Array;
  /** Raw bytes of one token's piece (may be part of a UTF-8 character). */
  tokenToPiece(token: number, special: boolean): Buffer;
  detokenize(tokens: Int32Array, special: boolean): string;
  isEog(token: number): boolean;
  /** Render messages with the model's template via llama.cpp common/chat; throws on bad input. */
  applyChatTemplate(input: NativeChatInput): NativeChatPrompt;
  createContext(opts: NativeContextOptions): Promise<NativeContext>;
  /** A context in embeddings mode (an encoder's only use of its weights). */
  createEmbedder(opts: NativeEmbedderOptions): Promise<NativeEmbedder>;
  /**
   * Loads a vision projector (mmproj GGUF) for this model (libmtmd). Rejects when the file is no
   * projector or its output width is not this model's n_embd.
   */
  loadProjector(path: string, opts?: NativeProjectorOptions): Promise<NativeProjector>;
  /** Each (query, document) pair's tokens as llama-server feeds a cross-encoder (its "rerank" template, else BOS query EOS SEP document EOS). */
  rerankInputs(query: string, documents: string[]): Promise<Int32Array[]>;
  dispose(): void;
}

export interface NativeProjectorOptions {
  /** CPU threads of the image encoder. */
  nThreads?: number;
  /** Encode on the GPU when the backend has one (default true). */
  useGpu?: boolean;
}

/** A loaded vision projector (native/src/vision.cpp). */
export interface NativeProjector {
  /** Where an image sits in a prompt's text (libmtmd's default marker, "<__media__>"). */
  readonly marker: string;
  /** The model places images on 2-D positions (M-RoPE, Qwen-VL): an image takes fewer positions than tokens. */
  readonly usesMrope: boolean;
  /** An image attends to itself both ways (gemma3): its positions are decoded in one micro-batch. */
  readonly nonCausalImages: boolean;
  /**
   * Splits a prompt holding one marker per image into text and image chunks; the images are
   * encoded files (PNG, JPEG, GIF, BMP...). Rejects on an image stb_image cannot decode.
   */
  tokenize(text: string, images: Buffer[], addSpecial: boolean, parseSpecial: boolean): Promise<NativeMediaPrompt>;
  dispose(): void;
}

export interface NativeMediaChunk {
  type: 'text' | 'image' | 'audio';
  /** Embeddings (positions of the prompt's token list) the chunk takes. */
  nTokens: number;
  /** KV positions it advances (nTokens but under M-RoPE). */
  nPos: number;
  /** Text chunks: their tokens. */
  tokens?: Int32Array;
  /** Media chunks: the image's hash (libmtmd's bitmap id). */
  id?: string;
}

/** A tokenized prompt with images (NativeProjector.tokenize); holds the preprocessed images until disposed. */
export interface NativeMediaPrompt {
  readonly chunks: NativeMediaChunk[];
  dispose(): void;
}

export interface NativeEmbedderOptions {
  /** Tokens one batch holds, and so the longest input. */
  nCtx: number;
  /** Inputs one batch holds. */
  nSeqMax: number;
  nThreads: number;
}

/** native/src/embedder.cpp: one pooled, unit-length vector per input. */
export interface NativeEmbedder {
  /** Dimensions of a vector. */
  readonly nEmbd: number;
  /** The longest input, in tokens. */
  readonly nCtx: number;
  readonly nSeqMax: number;
  /** The pooling llama.cpp applies (a model that pools nothing is mean-pooled); 'rank' is a cross-encoder's. */
  readonly pooling: 'mean' | 'cls' | 'last' | 'rank' | 'none';
  /** Rejects while another embed() runs. A cross-encoder ('rank') answers one raw relevance logit per input. */
  embed(inputs: Int32Array[]): Promise<Float32Array[]>;
  dispose(): void;
}

export interface NativeAddon {
  readonly backend: 'cpu' | 'cuda' | 'metal';
  /** llama_print_system_info */
  systemInfo(): string;
  /** GPU devices this backend sees (0 for cpu). */
  deviceCount(): number;
  /** Route llama.cpp/ggml logs (level: ggml_log_level) to JS; null restores silence. */
  setLogger(fn: ((level: number, text: string) => void) | null): void;
  loadModel(path: string, opts?: NativeLoadOptions): Promise<NativeModel>;
  /** _exit(code): no exit handlers or static destructors (a decode may be running on a worker thread). */
  exitNow(code: number): never;
}
