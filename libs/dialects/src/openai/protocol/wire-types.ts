/** Answer shapes of the chat-completions dialect (what the official client parses). */

export interface WireUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
  completion_tokens_details?: { reasoning_tokens: number };
  svc_prefill_ms: number;
  svc_decode_ms: number;
  svc_cached_prompt_tokens: number;
}

export interface WireToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface WireChatLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>;
}
