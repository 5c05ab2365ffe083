/** What POST /v1/route sorts a message into (spec). */
export const CATEGORIES = ['image', 'code', 'multilingual', 'reasoning', 'long-context', 'quick-chat', 'general'] as const;
export type Category = (typeof CATEGORIES)[number];

/**
 * The categories read from a message's text. `image` comes only from an attached picture and
 * `long-context` only from the conversation's length: a text that talks about a picture or a
 * long document is not one.
 */
export const TEXT_CATEGORIES = ['code', 'multilingual', 'reasoning', 'quick-chat', 'general'] as const;
export type TextCategory = (typeof TEXT_CATEGORIES)[number];

/** How the category was decided (spec). */
export type RouteMethod = 'attachment' | 'length' | 'embedding' | 'rules';

/** Spec, Limits: a conversation over this many characters is long-context, whatever it says. */
export const LENGTH_THRESHOLD = 6000;

export interface Classification {
  category: Category;
  /** 0 to 1. */
  confidence: number;
  method: RouteMethod;
  /** Why, in words. */
  reason: string;
}

/** Scores and confidences are answered to two decimals, and compared as answered. */
export function round2(x: number): number {
  return Math.round(x * 100) / 100;
}
