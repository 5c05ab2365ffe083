import { NativeSampler, NativeSamplerOptions } from '../backend/native-addon';

/** Idle samplers kept at most (each holds a vocabulary-sized candidate array once used). */
const MAX_IDLE = 8;

/**
 * Finished requests' samplers, reset and handed to the next request with the
 * same options: building llama.cpp's sampler chain (a dozen allocations, a seed
 * from the system's random device) was ~0.1 ms of every request's path to its
 * first token. A reset sampler is a new one: penalty and DRY history cleared,
 * its RNG reseeded from the request's seed (or a fresh random one). Samplers
 * with a grammar (constraints, tool calls) are never reused: their parse state
 * is not part of the reset.
 */
export class SamplerPool {
  private readonly idle: Array<{ key: string; sampler: NativeSampler }> = [];
  private readonly keys = new WeakMap<NativeSampler, string>();
  reuses = 0;
  private warned = false;

  constructor(private readonly create: (opts: NativeSamplerOptions) => NativeSampler) {}

  /** A sampler for these options: an idle one made with the same options, or a new one. */
  take(opts: NativeSamplerOptions): NativeSampler {
    const key = poolKey(opts);
    if (key !== undefined) {
      for (let i = this.idle.length - 1; i >= 0; i--) {
        if (this.idle[i].key !== key) continue;
        const { sampler } = this.idle.splice(i, 1)[0];
        this.reuses++;
        return sampler;
      }
    }
    const sampler = this.create(opts);
    if (key !== undefined) this.keys.set(sampler, key);
    return sampler;
  }

  /** The options a pooled sampler was made with (a key), undefined for one never reused. */
  keyOf(sampler: NativeSampler): string | undefined {
    return this.keys.get(sampler);
  }

  /** Back from a finished request (no step in flight uses it): kept for reuse, or freed. */
  give(sampler: NativeSampler): void {
    // Given twice it would be handed to two requests at once.
    if (this.idle.some((e) => e.sampler === sampler)) return;
    const key = this.keys.get(sampler);
    if (key === undefined) {
      sampler.dispose();
      return;
    }
    try {
      sampler.reset();
    } catch (err) {
      sampler.dispose(); // still marked in use by a failed step: not worth keeping
      if (!/in use/.test((err as Error).message) && !this.warned) {
        this.warned = true;
        process.emitWarning(`samplers are not reused: ${(err as Error).message} (rebuild the native addon)`);
      }
      return;
    }
    this.idle.push({ key, sampler });
    if (this.idle.length > MAX_IDLE) this.idle.shift()!.sampler.dispose();
  }

  /** Frees every idle sampler (the model is going away). */
  clear(): void {
    for (const { sampler } of this.idle.splice(0)) sampler.dispose();
  }
}

/** The options as a key, or undefined when the sampler may not be reused (a grammar, a chat prompt's). */
function poolKey(opts: NativeSamplerOptions): string | undefined {
  if (opts.grammar !== undefined || opts.jsonSchema !== undefined || opts.chat !== undefined || opts.thinkingOf !== undefined) return undefined;
  // -Infinity (a ban) and NaN would both print as null.
  return JSON.stringify(opts, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v));
}
