import { Usage } from '../../../../engine/src/core/generation-events';
import { WireUsage } from '../protocol/wire-types';

export function wireUsage(u: Usage): WireUsage {
  return {
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    total_tokens: u.promptTokens + u.completionTokens,
    prompt_tokens_details: { cached_tokens: u.cachedPromptTokens },
    // A reasoning model's thoughts, as the API counts them (only where there were any).
    ...(u.reasoningTokens ? { completion_tokens_details: { reasoning_tokens: u.reasoningTokens } } : {}),
    svc_prefill_ms: u.prefillMs,
    svc_decode_ms: u.decodeMs,
    svc_cached_prompt_tokens: u.cachedPromptTokens,
  };
}
