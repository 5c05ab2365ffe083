/**
 * What a chat template's text says about a model before it is loaded, as the local runner reads
 * it: /api/show's capabilities and POST /v1/route's ranking both ask here.
 */

/** A template that mentions tools can render them. */
export function templateRendersTools(template: string): boolean {
  return template.includes('tools');
}

/** A think tag, a thought channel or a reasoning switch: the model's thoughts come back apart. */
export function templateThinks(template: string): boolean {
  return /enable_thinking|reasoning_content|reasoning_effort|<think>|\[THINK\]|<\|channel\|?>/.test(template);
}
