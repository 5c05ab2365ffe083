import { Question } from './questions';

export type Answer =
  | { type: 'choice'; choice: string; probabilities: Record<string, number>; confidence: number }
  | { type: 'noul'; noul: number }
  | { type: 'score'; score: number; legend: Record<string, string>; probabilities: Record<string, number>; confidence: number };

/** A question's answer from its options' probabilities (in letter order, summing to 1). */
export function answerOf(q: Question, p: number[]): Answer {
  const byKey = Object.fromEntries(q.options.map((o, i) => [o.key, p[i]]));
  if (q.type === 'noul') return { type: 'noul', noul: byKey['true'] };
  if (q.type === 'score') {
    const legend = Object.fromEntries(q.options.map((o, i) => [String(i), o.text]));
    return { type: 'score', score: p.reduce((s, x, i) => s + x * i, 0), legend, probabilities: byKey, confidence: confidence(p) };
  }
  let best = 0;
  for (let i = 1; i < p.length; i++) if (p[i] > p[best]) best = i;
  return { type: 'choice', choice: q.options[best].key, probabilities: byKey, confidence: confidence(p) };
}

/** 1 minus the entropy over its maximum (ln n): 1 with all mass on one option, 0 when even. */
export function confidence(p: number[]): number {
  if (p.length < 2) return 1;
  const h = p.reduce((s, x) => (x > 0 ? s - x * Math.log(x) : s), 0);
  return Math.min(1, Math.max(0, 1 - h / Math.log(p.length)));
}
