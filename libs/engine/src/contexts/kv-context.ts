/** Positions per storage page: the unit `pages` and `shared_pages` count in. */
export const PAGE_TOKENS = 256;

/**
 * A reusable KV-cache context: a sequence of the model's unified KV cache that
 * outlives requests. A fork shares its parent's cells (seq_cp in a unified KV
 * buffer copies no bytes, done when the fork is first used); a page diverges
 * only when written.
 */
export class KvContext {
  /** Sequence id while resident; undefined while spilled to disk or lazy. */
  seq: number | undefined;
  /** Never modified in place (always replaced), so forks may share the array. */
  tokens: Int32Array = new Int32Array(0);
  /**
   * Set on a fork that has no sequence yet (lazy): its KV is the first
   * tokens.length positions of this context's, which is never itself lazy and
   * keeps those positions unchanged until it has given this one a sequence
   * (residency.ts).
   */
  lazySource?: KvContext;
  /** Leading positions whose cells are still the parent's. */
  sharedWithParent = 0;
  spillPath?: string;
  /** Set when the spill file was inherited from a deleted source: the cells it holds past this many are the source's, cut when it comes back. */
  spillCells?: number;
  busy = false;
  lastUsed = Date.now();
  /** The named session (svc_session) bound to this context, if any: its key in the registry (owner and name). */
  sessionKey?: string;
  /** Held for the engine's own use (a stored response's conversation): absent from the contexts routes. */
  hidden = false;
  /** Deleted as soon as the request bound to it lets go (its owner dropped it mid-generation). */
  dropWhenIdle = false;
  /**
   * Where model-written text first begins in `tokens` (an answer turn from its generation prompt
   * on, or an assistant message a context was made with). A template renders such text again
   * unlike the tokens sampled (past thoughts dropped, calls in its own format, a reply's first
   * characters joined to the turn's header), so a later prompt may depart from the context
   * anywhere past it and is recomputed from there; before it, the prompt must match.
   */
  answerFrom?: number;

  constructor(
    readonly id: string,
    /** Caller (and marking) that owns it; '' on a server without named callers. */
    readonly owner: string,
    readonly parent: string,
    readonly created: number,
  ) {}

  get pages(): number {
    return Math.ceil(this.tokens.length / PAGE_TOKENS);
  }

  /** Pages still the parent's: a partly filled last page stays shared until this context writes into it. */
  get sharedPages(): number {
    const shared = Math.min(this.sharedWithParent, this.tokens.length);
    return shared === this.tokens.length ? Math.ceil(shared / PAGE_TOKENS) : Math.floor(shared / PAGE_TOKENS);
  }

  /** The spec's context object. */
  toJSON(): Record<string, unknown> {
    const o: Record<string, unknown> = {
      id: this.id,
      parent: this.parent,
      created: this.created,
      tokens: this.tokens.length,
      pages: this.pages,
      shared_pages: this.sharedPages,
    };
    if (this.spillPath !== undefined) o.spilled = true;
    return o;
  }
}
