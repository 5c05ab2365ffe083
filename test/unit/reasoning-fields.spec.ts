import { reasoningFrom } from '../../libs/dialects/src/shared/reasoning';

/** How a chat request's reasoning fields map onto the template's switches, as llama-server reads them. */
describe('reasoningFrom', () => {
  it('leaves the template\'s defaults when nothing is asked (null is absent)', () => {
    expect(reasoningFrom({})).toEqual({});
    expect(reasoningFrom({ reasoning_effort: null, reasoning_format: null, reasoning_budget_tokens: null, chat_template_kwargs: null })).toEqual({});
  });

  it('enable_thinking switches thinking; other kwargs go to the template', () => {
    expect(reasoningFrom({ chat_template_kwargs: { enable_thinking: false, custom: 1 } })).toEqual({ thinking: false, templateKwargs: { enable_thinking: false, custom: 1 } });
    expect(() => reasoningFrom({ chat_template_kwargs: { enable_thinking: 'no' } })).toThrow(/enable_thinking must be a boolean/);
  });

  it('effort "none" turns thinking off; another effort is the template\'s reasoning_effort', () => {
    expect(reasoningFrom({ reasoning_effort: 'none' })).toEqual({ thinking: false });
    expect(reasoningFrom({ reasoning_effort: 'high' })).toEqual({ templateKwargs: { reasoning_effort: 'high' } });
    expect(() => reasoningFrom({ reasoning_effort: 'max' }, 'reasoning.effort')).toThrow(/^reasoning\.effort must be one of/);
  });

  it('a budget of 0 is no thinking, -1 no limit, a positive one a limit', () => {
    expect(reasoningFrom({ reasoning_budget_tokens: 0 })).toEqual({ thinking: false });
    expect(reasoningFrom({ thinking_budget_tokens: -1 })).toEqual({});
    expect(reasoningFrom({ thinking_budget_tokens: 50 })).toEqual({ thinkingBudget: 50 });
  });

  it('reasoning_format none keeps the thoughts in the text; an unknown format is refused', () => {
    expect(reasoningFrom({ reasoning_format: 'none' })).toEqual({ splitReasoning: false });
    expect(reasoningFrom({ reasoning_format: 'deepseek' })).toEqual({});
    expect(() => reasoningFrom({ reasoning_format: 'json' })).toThrow(/reasoning_format must be/);
  });
});
