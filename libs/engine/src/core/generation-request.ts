/**
 * The one request model in the middle: every dialect maps its DTO to a
 * GenerationRequest, and renders the GenerationEvent stream in its own format.
 */

/** A chat message as the engine sees it (OpenAI-shaped, which llama.cpp's common/chat reads). */
export interface CoreMessage {
  role: string;
  content: string | CoreContentPart[] | null;
  name?: string;
  tool_calls?: CoreToolCall[];
  tool_call_id?: string;
  reasoning_content?: string;
}

export type CoreContentPart =
  | { type: 'text'; text: string }
  /** An image, PDF, video or audio part; its bytes or URL as the dialect gave them. */
  | { type: 'media'; kind: 'image' | 'file' | 'video' | 'audio'; url?: string; data?: string; mime?: string; /** A file's name, as the caller gave it. */ name?: string };

export interface CoreToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface CoreTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

export type CoreToolChoice = 'auto' | 'none' | 'required' | { name: string };

export type PromptInput =
  /** Raw text continued as is (completions, raw generate). */
  | { kind: 'text'; text: string }
  /** Fill in the middle: the text between `prefix` and `suffix`, through the vocabulary's FIM markers. */
  | { kind: 'infill'; prefix: string; suffix: string }
  /** Messages rendered through the model's chat template. */
  | {
      kind: 'chat';
      messages: CoreMessage[];
      tools?: CoreTool[];
      toolChoice?: CoreToolChoice;
      parallelToolCalls?: boolean;
      /** The last assistant message is a prefill to continue. */
      continueFinal?: boolean;
      /** Open the assistant's turn at the end (default true). */
      generationPrompt?: boolean;
      /**
       * A model without a chat template takes the user's text as it is, not svc's fallback
       * template: the local runner's /api/generate, whose default template is `{{ .Prompt }}`.
       */
      plainWithoutTemplate?: boolean;
      /** The template's enable_thinking: false asks a reasoning model to answer without thinking (default: the template's). */
      thinking?: boolean;
      /** Thinking asked for by name (the local runner's think true or a level): a model that cannot think is a 400, as there. */
      thinkingRequired?: boolean;
      /** Tokens of thought before the think block is closed for the model (llama.cpp's reasoning budget); absent = no limit. */
      thinkingBudget?: number;
      /** Return the model's thoughts apart from the content (default true; false leaves them in the text). */
      splitReasoning?: boolean;
      /** Extra template variables (llama-server's chat_template_kwargs, e.g. reasoning_effort). */
      templateKwargs?: Record<string, unknown>;
    };

export interface SamplingParams {
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
  /** token id → bias; -Infinity (or <= -100 as OpenAI) bans. */
  logitBias?: Record<number, number>;
  dryMultiplier?: number;
  dryBase?: number;
  dryAllowedLength?: number;
  bannedTokens?: number[];
  /** Keep generating past end-of-generation tokens (benchmarks). */
  ignoreEos?: boolean;
}

export type OutputConstraint =
  | { kind: 'none' }
  | { kind: 'json' }
  | { kind: 'json_schema'; schema: unknown }
  | { kind: 'grammar'; gbnf: string }
  /** The -lexicon word list (libs/engine/src/constraints/lexicon.ts); strict = listed words and single spaces only. */
  | { kind: 'lexicon'; strict: boolean };

export interface GenerationRequest {
  /** Requested model name ('' = default). Resolved by the engine service. */
  model: string;
  prompt: PromptInput;
  sampling: SamplingParams;
  maxTokens: number;
  stop: string[];
  constraint: OutputConstraint;
  /** Return raw-logit log-probabilities with this many alternatives (0 = off, -1 = chosen only). */
  logprobs: number;
  /** Keep this request's KV in the shared prefix cache when it finishes. */
  retainPrefix: boolean;
  /** Start from the longest retained prefix of the prompt (default true; llama-server's cache_prompt). */
  reusePrefix?: boolean;
  /**
   * Token ids read before the prompt (the local runner's deprecated `context`, a previous
   * answer's): as text in front of the rendered prompt. Ids outside the vocabulary are a 400.
   */
  priorTokens?: number[];
  /** svc_session: run on this named KV context (created on first use); the prompt must start with what it holds. */
  session?: string;
  /**
   * Keep this request's KV in a hidden context that outlives it (stored responses):
   * a fork of `from` when that is this owner's context on the resolved model (the
   * prompt is not read again), else a new context. The handle names the context.
   */
  keepContext?: { from?: ContextRef };
  /** Owner of contexts the request touches ('' without named callers). */
  owner?: string;
  /** Ends the generation at the next step (client disconnect). */
  signal?: AbortSignal;
}

/** What a request's transport knows of it, beyond its body: the client's signal and the owner key. */
export type RequestScope = Pick<GenerationRequest, 'signal' | 'owner'>;

/** A context the engine keeps for a caller, named by the weights it lives on. */
export interface ContextRef {
  /** The weights file the context lives on (not a name: two names of one file share its contexts). */
  weights: string;
  id: string;
}

export const DEFAULT_SAMPLING: Readonly<SamplingParams> = Object.freeze({});
