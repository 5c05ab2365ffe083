/**
 * The free KV sequence ids, most recently freed first, each remembering the sampler
 * configuration that last ran on it.
 *
 * With sampling in the compute graph (-backend-sampling) llama.cpp binds a sampler
 * chain to a sequence id; a request whose chain differs from the one its id holds
 * needs a new chain set up for the graph (and, when the bound chains outgrow
 * llama.cpp's node budget, a re-plan of its graphs: 43–66 ms on an H200 for the 0.5B
 * benchmark model, bench/sampling.mjs), while one with the same configuration takes
 * the bound chain over for free. So a request gets an id that last ran its
 * configuration when one is free. Without graph sampling the choice costs nothing:
 * free ids hold no KV.
 */
export class SeqIds {
  private readonly free: number[] = [];
  private readonly lastConfig = new Map<number, string>();

  /** Ids 0..n-1, handed out from 0 up. */
  constructor(n: number) {
    for (let s = n - 1; s >= 0; s--) this.free.push(s);
  }

  get size(): number {
    return this.free.length;
  }

  /** The most recently freed id that last ran `config`, else the most recently freed one. */
  take(config?: string): number | undefined {
    if (config !== undefined) {
      for (let i = this.free.length - 1; i >= 0; i--) {
        if (this.lastConfig.get(this.free[i]) === config) return this.free.splice(i, 1)[0];
      }
    }
    return this.free.pop();
  }

  give(seq: number): void {
    this.free.push(seq);
  }

  /** What ran on `seq`: a sampler configuration, or undefined (a grammar, top logprobs: sampled on the CPU). */
  ran(seq: number, config: string | undefined): void {
    if (config === undefined) this.lastConfig.delete(seq);
    else this.lastConfig.set(seq, config);
  }
}
