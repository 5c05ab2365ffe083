import { round2, TEXT_CATEGORIES, TextCategory } from '../categories';

/**
 * Nearest-centroid classification over sentence vectors: each category is the normalised mean of
 * its training examples' vectors, and a message goes to the category whose centroid is closest by
 * cosine. Pure arithmetic: the vectors come from the encoder (ClassifierEncoder).
 */

export interface Centroids {
  categories: TextCategory[];
  vectors: Float32Array[];
}

/**
 * Softmax temperature over the cosine similarities (confidence only, never the choice): sentence
 * encoders put related prompts 0.1 to 0.3 apart in cosine, so 0.05 turns such a gap into odds of
 * e^2 to e^6.
 */
const TEMPERATURE = 0.05;

export function centroidsOf(examples: Array<{ category: TextCategory; vector: Float32Array }>): Centroids {
  const categories = TEXT_CATEGORIES.filter((c) => examples.some((e) => e.category === c));
  const vectors = categories.map((c) => {
    const mine = examples.filter((e) => e.category === c);
    const sum = new Float32Array(mine[0].vector.length);
    for (const e of mine) for (let i = 0; i < sum.length; i++) sum[i] += e.vector[i];
    return unit(sum);
  });
  return { categories, vectors };
}

export interface EmbeddingAnswer {
  category: TextCategory;
  confidence: number;
  /** Cosine similarity to each centroid, best first. */
  similarities: Array<{ category: TextCategory; cosine: number }>;
}

export function nearestCentroid(c: Centroids, vector: Float32Array): EmbeddingAnswer {
  const v = unit(Float32Array.from(vector));
  const sims = c.categories.map((category, k) => ({ category, cosine: dot(v, c.vectors[k]) }));
  sims.sort((a, b) => b.cosine - a.cosine);
  const top = sims[0].cosine;
  // Shifted by the top similarity so the exponentials cannot overflow.
  const weights = sims.map((s) => Math.exp((s.cosine - top) / TEMPERATURE));
  const confidence = weights[0] / weights.reduce((a, b) => a + b, 0);
  return { category: sims[0].category, confidence: round2(confidence), similarities: sims };
}

function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

function unit(v: Float32Array): Float32Array {
  const n = Math.sqrt(dot(v, v));
  if (n > 0) for (let i = 0; i < v.length; i++) v[i] /= n;
  return v;
}
