import { CHAT_DEFAULT_MAX_TOKENS } from '../../../dialects/src/openai/mapping/chat-request.mapper';
import { RouteInput } from '../route-input';

/**
 * Whether a conversation fits a model, without loading it. Counting tokens needs the model's own
 * tokenizer, which is only there once it is loaded, so tokens are estimated from characters:
 * about four characters a token for English prose (OpenAI's rule of thumb; code and other
 * scripts take more tokens per character, so this errs towards "fits").
 */

export const CHARS_PER_TOKEN = 4;
/** What a chat template adds around each message (role markers, separators). */
export const TOKENS_PER_MESSAGE = 4;
/**
 * A picture, as a vision projector feeds it to the model: LLaVA-1.5 takes 576 positions
 * (24 × 24 patches), Gemma 3 takes 256; the larger is counted.
 */
export const TOKENS_PER_PICTURE = 576;
/** Room left for the answer: the chat route's max_tokens default. */
export const ANSWER_ROOM = CHAT_DEFAULT_MAX_TOKENS;

export function estimateTokens(input: Pick<RouteInput, 'chars' | 'messages' | 'pictures'>): number {
  return Math.ceil(input.chars / CHARS_PER_TOKEN) + input.messages * TOKENS_PER_MESSAGE + input.pictures * TOKENS_PER_PICTURE;
}

/** The conversation and room for an answer within the positions a request gets. */
export function fitsContext(tokens: number, context: number): boolean {
  return tokens + ANSWER_ROOM <= context;
}
