import { InvalidRequestError } from '../../../engine/src/core/errors';
import { PromptInput } from '../../../engine/src/core/generation-request';

type ChatPrompt = Extract<PromptInput, { kind: 'chat' }>;
export type ReasoningFields = Pick<ChatPrompt, 'thinking' | 'thinkingBudget' | 'splitReasoning' | 'templateKwargs'>;

const EFFORTS = ['none', 'minimal', 'low', 'medium', 'high', 'xhigh'];

/**
 * How a chat request asks a reasoning model to think, as llama-server reads it:
 * chat_template_kwargs go to the template (enable_thinking also switches the think block),
 * reasoning_effort "none" turns thinking off and any other effort is a template variable
 * (gpt-oss reads it), reasoning_format "none" leaves the thoughts in the text.
 */
export function reasoningFrom(
  d: { chat_template_kwargs?: Record<string, unknown> | null; reasoning_effort?: string | null; reasoning_format?: string | null; reasoning_budget_tokens?: number | null; thinking_budget_tokens?: number | null },
  effortField = 'reasoning_effort',
): ReasoningFields {
  const out: ReasoningFields = {};
  const budget = d.reasoning_budget_tokens ?? d.thinking_budget_tokens;
  // 0 is no thinking at all, as llama-server's --reasoning-budget 0 (a budget of 0 was never enforced:
  // the newline after a prompt's opening tag spent the forced end tag).
  if (budget === 0) out.thinking = false;
  else if (budget !== undefined && budget !== null && budget > 0) out.thinkingBudget = budget;
  const kwargs = { ...(d.chat_template_kwargs ?? {}) };
  if ('enable_thinking' in kwargs) {
    const v = kwargs.enable_thinking;
    if (typeof v !== 'boolean') throw new InvalidRequestError(`chat_template_kwargs.enable_thinking must be a boolean, got ${JSON.stringify(v)}`);
    out.thinking = v;
  }
  const effort = d.reasoning_effort;
  if (effort !== undefined && effort !== null) {
    if (!EFFORTS.includes(effort)) throw new InvalidRequestError(`${effortField} must be one of ${EFFORTS.join(', ')}, got "${effort}"`);
    if (effort === 'none') {
      out.thinking = false;
      delete kwargs.reasoning_effort;
    } else kwargs.reasoning_effort = effort;
  }
  if (d.reasoning_format !== undefined && d.reasoning_format !== null) {
    if (!['none', 'auto', 'deepseek', 'deepseek-legacy'].includes(d.reasoning_format)) {
      throw new InvalidRequestError(`reasoning_format must be none, auto, deepseek or deepseek-legacy, got "${d.reasoning_format}"`);
    }
    if (d.reasoning_format === 'none') out.splitReasoning = false;
  }
  if (Object.keys(kwargs).length) out.templateKwargs = kwargs;
  return out;
}
