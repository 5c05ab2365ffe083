import { Usage } from '../../../../engine/src/core/generation-events';
import { WireUsage } from '../protocol/wire-types';

export function wireUsage(u: Usage): WireUsage {
  return {
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    total_tokens: u.promptTokens + u.completionTokens,
    prompt_tokens_details: { cached_tokens: u.cachedPromptTokens },
    svc_prefill_ms: u.prefillMs,
    svc_decode_ms: u.decodeMs,
    svc_cached_prompt_tokens: u.cachedPromptTokens,
  };
}
