/** Answer shapes of the messages dialect (what the official SDK parses). */

export type WireStopReason = 'end_turn' | 'stop_sequence' | 'max_tokens' | 'tool_use';

export interface WireUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens: number;
  /** Nothing is ever written to a billed cache here: the prefix cache is automatic. */
  cache_creation_input_tokens: number;
}

export type WireContentBlock =
  /** A reasoning model's thoughts; svc signs nothing, so the signature is empty. */
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: unknown };

export interface WireMessage {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: WireContentBlock[];
  stop_reason: WireStopReason | null;
  stop_sequence: string | null;
  usage: WireUsage;
}
