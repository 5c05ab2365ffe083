/** Answer shapes of the Responses dialect (what the official client parses). */

export interface WireOutputText {
  type: 'output_text';
  text: string;
  annotations: unknown[];
  logprobs: unknown[];
}

export interface WireMessageItem {
  id: string;
  type: 'message';
  role: 'assistant';
  status: 'in_progress' | 'completed' | 'incomplete';
  content: WireOutputText[];
}

export interface WireFunctionCallItem {
  id: string;
  type: 'function_call';
  call_id: string;
  name: string;
  arguments: string;
  status: 'in_progress' | 'completed' | 'incomplete';
}

/** A reasoning model's thoughts, as reasoning text (nothing is summarised or encrypted here). */
export interface WireReasoningItem {
  id: string;
  type: 'reasoning';
  summary: unknown[];
  content: Array<{ type: 'reasoning_text'; text: string }>;
  status: 'in_progress' | 'completed' | 'incomplete';
}

export type WireOutputItem = WireReasoningItem | WireMessageItem | WireFunctionCallItem;

export interface WireResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
  svc_cached_prompt_tokens: number;
  svc_prefill_ms: number;
  svc_decode_ms: number;
}

export interface WireResponse {
  id: string;
  object: 'response';
  created_at: number;
  status: 'in_progress' | 'completed' | 'incomplete';
  error: null;
  incomplete_details: { reason: 'max_output_tokens' } | null;
  instructions: string | null;
  max_output_tokens: number;
  model: string;
  output: WireOutputItem[];
  parallel_tool_calls: boolean;
  previous_response_id: string | null;
  store: boolean;
  temperature: number | null;
  top_p: number | null;
  text: { format: Record<string, unknown> };
  tool_choice: unknown;
  tools: unknown[];
  truncation: 'disabled';
  metadata: Record<string, string>;
  usage: WireResponseUsage | null;
}
