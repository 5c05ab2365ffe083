import { NativeChatPrompt, NativeModel } from '../backend/native-addon';
import { InvalidRequestError } from '../core/errors';
import { CoreMessage, CoreToolChoice, OutputConstraint, PromptInput } from '../core/generation-request';
import { FALLBACK_CHAT_TEMPLATE } from './fallback-template';

export interface RenderedPrompt {
  text: string;
  /** Set for chat prompts: llama.cpp's chat params (tool grammar, output parser). */
  chat?: NativeChatPrompt;
  /** The output is parsed for tool calls. */
  parseTools: boolean;
}

/** Turns a core prompt into model text through the model's own chat template. */
export function renderPrompt(model: NativeModel, prompt: PromptInput, constraint: OutputConstraint): RenderedPrompt {
  if (prompt.kind === 'text') return { text: prompt.text, parseTools: false };
  const media = prompt.messages.flatMap((m) => (Array.isArray(m.content) ? m.content.filter((p) => p.type === 'media') : []));
  if (media.length > 0) {
    // Vision needs a projector (mmproj) loaded beside the model; none is here.
    throw new InvalidRequestError(`this model has no vision projector; it cannot read ${media[0].kind} parts`);
  }
  const tools = prompt.tools ?? [];
  const useTools = tools.length > 0 && prompt.toolChoice !== 'none';
  let chat: NativeChatPrompt;
  try {
    chat = model.applyChatTemplate({
      messages: prompt.messages.map(textOnly),
      tools: useTools ? tools : undefined,
      toolChoice: useTools ? toolChoiceText(prompt.toolChoice) : undefined,
      parallelToolCalls: prompt.parallelToolCalls ?? false,
      addGenerationPrompt: !prompt.continueFinal && (prompt.generationPrompt ?? true),
      continueFinalMessage: prompt.continueFinal ?? false,
      templateOverride: model.info.chatTemplate ? undefined : FALLBACK_CHAT_TEMPLATE,
      jsonSchema: useTools && constraint.kind === 'json_schema' ? JSON.stringify(constraint.schema) : undefined,
    });
  } catch (err) {
    throw new InvalidRequestError(`cannot render the chat template: ${(err as Error).message}`);
  }
  return { text: chat.prompt, chat, parseTools: useTools };
}

function toolChoiceText(choice: CoreToolChoice | undefined): string {
  if (choice === undefined) return 'auto';
  // A named function is required; the schema-constrained call grammar then
  // produces a call (the template sees only the tools, filtered by the caller).
  return typeof choice === 'string' ? choice : 'required';
}

/** llama.cpp's template code reads string content or text parts. */
function textOnly(m: CoreMessage): CoreMessage {
  if (!Array.isArray(m.content)) return { ...m, content: m.content ?? '' };
  return { ...m, content: m.content.map((p) => (p.type === 'text' ? p.text : '')).join('') };
}
