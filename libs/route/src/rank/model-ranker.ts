import { Category, round2 } from '../categories';
import { Preference } from '../protocol/route.dto';
import { ModelTraits } from './model-traits';

/**
 * Scores installed chat models for a category. The scale: a model's strength is
 * log2(parameters in billions) + 4, at most 10, so ONE POINT IS A DOUBLING OF PARAMETERS
 * (1B scores 4, 8B 7, 64B and more 10; a model under 62.5M scores below 0, and the tiny test
 * models still differ by size). The category adds points
 * for what suits it, sized against that scale (a code model by name is worth three doublings),
 * and a model that cannot take the request loses points. `cheap` takes the smallest model within
 * one point of the best: one that does as well as a model twice its size.
 */

export interface Candidate extends ModelTraits {
  /** The conversation plus room for an answer fits the context it gets. */
  fitsContext: boolean;
  /** Its memory estimate fits the room beside the models loaded now. */
  fitsMemory: boolean;
}

export interface Scored {
  candidate: Candidate;
  /** Rounded to two decimals; every comparison uses the rounded value, as shown. */
  score: number;
  /** Each part of the score, in words. */
  reason: string;
}

const POINTS = {
  /** Code models by name (coder, codestral, starcoder…). */
  codeName: 3,
  /** A think block in the template; a reasoning name (r1, qwq, reason, think) without one. */
  thinks: 3,
  reasoningName: 2,
  /** Vocabularies of 100k tokens and more hold other scripts' words whole (Qwen, Llama 3, Gemma); 64k some. */
  bigVocab: 2,
  midVocab: 1,
  multilingualName: 1,
  vision: 5,
  /** Tools render: the model was tuned to follow structured instructions. */
  tools: 0.5,
  /** quick-chat: a model of at most 4B answers a greeting as well, sooner. */
  quick: 1,
  /** Per doubling of the context past 4096 positions, up to 4 (long-context). */
  contextDoubling: 1,
  noRoomInContext: -5,
  noRoomInMemory: -3,
};

const CODE_NAME = /cod(e|er|ing|estral)|starcoder|devstral/;
const REASONING_NAME = /(^|[^a-z])r1([^0-9]|$)|qwq|reason|think|magistral/;
const MULTILINGUAL_NAME = /aya|bloom|multilingual|xglm|polylm|seallm/;

export function strength(params: number): number {
  return Math.min(10, Math.log2(Math.max(params, 1) / 1e9) + 4);
}

export function scoreModel(category: Category, c: Candidate): Scored {
  const parts: Array<[string, number]> = [];
  const add = (what: string, points: number) => {
    if (points !== 0) parts.push([what, points]);
  };
  // A greeting needs little of a model: its size counts half.
  const base = strength(c.params) * (category === 'quick-chat' ? 0.5 : 1);
  parts.push([`${paramText(c.params)} parameters`, base]);
  if (category === 'code' && CODE_NAME.test(c.names)) add('a code model by name', POINTS.codeName);
  if ((category === 'code' || category === 'general') && c.tools) add('renders tools', POINTS.tools);
  if (category === 'reasoning') {
    if (c.thinks) add('a think block in its template', POINTS.thinks);
    else if (REASONING_NAME.test(c.names)) add('a reasoning model by name', POINTS.reasoningName);
  }
  if (category === 'multilingual') {
    if (c.vocab >= 100_000) add(`a ${Math.round(c.vocab / 1000)}k-token vocabulary`, POINTS.bigVocab);
    else if (c.vocab >= 64_000) add(`a ${Math.round(c.vocab / 1000)}k-token vocabulary`, POINTS.midVocab);
    if (MULTILINGUAL_NAME.test(c.names)) add('a multilingual model by name', POINTS.multilingualName);
  }
  if (category === 'image' && c.vision) add('a vision projector', POINTS.vision);
  if (category === 'long-context') add(`${c.context} positions`, POINTS.contextDoubling * Math.min(4, Math.max(0, Math.log2(c.context / 4096))));
  if (category === 'quick-chat' && c.params <= 4e9) add('small enough to answer fast', POINTS.quick);
  if (!c.fitsContext) add(`the conversation does not fit its ${c.context} positions`, POINTS.noRoomInContext);
  if (!c.fitsMemory) add('does not fit the memory left', POINTS.noRoomInMemory);
  const score = round2(parts.reduce((a, [, p]) => a + p, 0));
  return { candidate: c, score, reason: parts.map(([what, p]) => `${what} ${p >= 0 ? '+' : ''}${round2(p)}`).join(', ') };
}

/** Best first; a tie goes to the smaller model (as good, and cheaper), then by name. */
export function rankModels(category: Category, candidates: Candidate[]): Scored[] {
  return candidates.map((c) => scoreModel(category, c)).sort((a, b) => b.score - a.score || a.candidate.params - b.candidate.params || a.candidate.name.localeCompare(b.candidate.name));
}

/** The model a preference takes from a ranking (`local` and `best`: the first; `cheap`: the smallest within one point of it). */
export function pick(ranked: Scored[], prefer: Preference): { chosen: Scored; reason: string } | undefined {
  const best = ranked[0];
  if (!best) return undefined;
  if (prefer !== 'cheap') return { chosen: best, reason: `the highest score (${best.score})` };
  // Rounded scores, so "within one point" is what the answer shows (1e-9: a float's last digit).
  const near = ranked.filter((s) => s.score >= best.score - 1 - 1e-9);
  const chosen = near.reduce((a, b) => (b.candidate.params < a.candidate.params ? b : a));
  const reason =
    chosen === best
      ? `the highest score (${best.score}), and no smaller model within one point of it`
      : `the smallest model within one point of the best (${best.candidate.name} scores ${best.score}; this one ${chosen.score})`;
  return { chosen, reason };
}

export function paramText(n: number): string {
  for (const [d, u] of [[1e12, 'T'], [1e9, 'B'], [1e6, 'M'], [1e3, 'K']] as const) if (n >= d) return `${(n / d).toFixed(1).replace(/\.0$/, '')}${u}`;
  return String(n);
}
