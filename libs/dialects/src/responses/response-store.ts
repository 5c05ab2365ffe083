import { ContextRef, CoreMessage } from '../../../engine/src/core/generation-request';
import { WireResponse } from './protocol/wire-types';
import { WireInputItem } from './rendering/input-items';

/** The spec's bound: only the last 256 stored responses are kept. */
export const STORED_RESPONSES_CAP = 256;

export interface StoredResponse {
  /** The public object as answered. */
  response: WireResponse;
  /** Caller and marking (identity.ts ownerKey); '' without named callers. */
  owner: string;
  /** The whole conversation through this turn, instructions excluded (they are per turn). */
  conversation: CoreMessage[];
  /** This turn's `input` as GET .../input_items lists it. */
  inputItems: WireInputItem[];
  /** The KV context holding that conversation, on the model that made it. */
  context?: ContextRef;
}

/**
 * Stored responses, oldest first. Pure bookkeeping: the caller frees the
 * contexts of what `put` evicts and `remove` returns.
 */
export class ResponseStore {
  private readonly byId = new Map<string, StoredResponse>();

  constructor(private readonly cap = STORED_RESPONSES_CAP) {}

  get size(): number {
    return this.byId.size;
  }

  /** Stores a record; returns the records evicted to stay within the cap (oldest first). */
  put(rec: StoredResponse): StoredResponse[] {
    this.byId.set(rec.response.id, rec);
    const evicted: StoredResponse[] = [];
    for (const [id, old] of this.byId) {
      if (this.byId.size <= this.cap) break;
      this.byId.delete(id);
      evicted.push(old);
    }
    return evicted;
  }

  /** Another owner's response does not exist (404, never 403). */
  get(id: string, owner: string): StoredResponse | undefined {
    const r = this.byId.get(id);
    return r && r.owner === owner ? r : undefined;
  }

  remove(id: string, owner: string): StoredResponse | undefined {
    const r = this.get(id, owner);
    if (r) this.byId.delete(id);
    return r;
  }
}
