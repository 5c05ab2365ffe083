/** The one event stream every dialect renders. */

export type FinishReason = 'stop' | 'length' | 'tool_calls';

export interface TokenLogprob {
  token: string;
  bytes: number[];
  logprob: number;
  top: Array<{ token: string; bytes: number[]; logprob: number }>;
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  cachedPromptTokens: number;
  prefillMs: number;
  decodeMs: number;
  /** Tokens that wrote thoughts (a reasoning template's think block), counted as their text came out. */
  reasoningTokens?: number;
}

export interface ToolCallEvent {
  index: number;
  id: string;
  name: string;
  arguments: string;
}

export type GenerationEvent =
  /** Text ready to show (stop strings already held back and removed). */
  | { type: 'delta'; text: string; logprobs?: TokenLogprob[] }
  /** The model's thoughts (a reasoning template's think block), before any delta of the answer. */
  | { type: 'reasoning'; text: string; logprobs?: TokenLogprob[] }
  /** Complete tool calls parsed from the output (emitted before `done`). */
  | { type: 'tool_calls'; calls: ToolCallEvent[] }
  | {
      type: 'done';
      finishReason: FinishReason;
      /** The stop string that ended generation, when one did. */
      stopSequence?: string;
      usage: Usage;
      /** Model name as resolved. */
      model: string;
      /** The output as generated, when it was parsed (thoughts, their tags and call syntax included). */
      output?: string;
    };
