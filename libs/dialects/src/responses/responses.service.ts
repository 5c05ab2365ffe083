import { Inject, Injectable, Logger } from '@nestjs/common';
import { EngineError, InvalidRequestError } from '../../../engine/src/core/errors';
import { CoreMessage } from '../../../engine/src/core/generation-request';
import { GenerationEvent } from '../../../engine/src/core/generation-events';
import { EngineService, GenerationHandle } from '../../../engine/src/engine.service';
import { MediaTally } from '../../../engine/src/media/media-plan';
import { ownerKey, RequestIdentity } from '../../../http/src/identity';
import { newId, nowSeconds } from '../shared/collect';
import { KeyedLock } from './keyed-lock';
import { responsesRequestToCore } from './mapping/responses-request.mapper';
import { ResponsesRequestDto } from './protocol/responses.dto';
import { WireResponse } from './protocol/wire-types';
import { ResponseStore, StoredResponse } from './response-store';
import { InputItemsPage, pageOf, PageQuery, wireInputItems } from './rendering/input-items';

export class ResponseNotFoundError extends EngineError {
  constructor(id: string) {
    super(`no response with id ${id}`, 404);
  }
}

/** One turn under way: render `events` from `base`, then finish() with the answer or abandon(). */
export interface Turn {
  base: WireResponse;
  events: AsyncIterable<GenerationEvent>;
  /** Stores the answer (or, with store false, drops its context). */
  finish(final: WireResponse): Promise<void>;
  /** The turn ended without an answer (client gone, failure): its context is dropped. No-op after finish. */
  abandon(): Promise<void>;
  /** Present when the prompt's pictures were thinned. */
  media?: MediaTally;
}

/**
 * Stored responses and their KV contexts. A turn runs on a fork of the turn it
 * continues (the engine shares cells, copies nothing), so every stored turn can
 * be branched from and branches stay independent.
 */
@Injectable()
export class ResponsesService {
  private readonly log = new Logger('responses');
  private readonly store = new ResponseStore();
  private readonly locks = new KeyedLock();

  constructor(@Inject(EngineService) private readonly engine: EngineService) {}

  async begin(d: ResponsesRequestDto, who: RequestIdentity, signal: AbortSignal): Promise<Turn> {
    const owner = ownerKey(who);
    // null is "no previous turn", as OpenAI's clients send it.
    const prev = d.previous_response_id == null ? undefined : this.previous(d.previous_response_id, owner);
    const { request, input } = responsesRequestToCore(d, prev, owner, signal);
    // Forks of one context are serialized: the registry refuses a second writer (409) otherwise.
    const handle = prev ? await this.locks.run(prev.response.id, () => this.engine.generate(request)) : await this.engine.generate(request);
    const base = baseResponse(d, handle, request.maxTokens);
    const store = d.store ?? true;
    let settled = false;
    return {
      base,
      events: handle.events,
      media: handle.media,
      finish: async (final) => {
        settled = true;
        const conversation = [...(prev?.conversation ?? []), ...input, assistantTurn(final)];
        const rec: StoredResponse = { response: final, owner, conversation, inputItems: wireInputItems(d.input), context: handle.context };
        if (!store) return this.drop(rec);
        // Records pushed out of the store free their contexts in the background: their weights may be
        // loading or finishing other work, and this answer need not wait for that.
        for (const old of this.store.put(rec)) void this.drop(old);
      },
      abandon: async () => {
        if (settled) return;
        settled = true;
        await this.drop({ response: base, owner, conversation: [], inputItems: [], context: handle.context });
      },
    };
  }

  get(id: string, who: RequestIdentity): WireResponse {
    const rec = this.store.get(id, ownerKey(who));
    if (!rec) throw new ResponseNotFoundError(id);
    return rec.response;
  }

  /** GET /v1/responses/{id}/input_items: what the turn was sent, paged. */
  inputItems(id: string, who: RequestIdentity, q: PageQuery): InputItemsPage {
    const rec = this.store.get(id, ownerKey(who));
    if (!rec) throw new ResponseNotFoundError(id);
    return pageOf(rec.inputItems, q);
  }

  async remove(id: string, who: RequestIdentity): Promise<{ id: string; object: 'response'; deleted: true }> {
    const rec = this.store.remove(id, ownerKey(who));
    if (!rec) throw new ResponseNotFoundError(id);
    await this.drop(rec);
    return { id, object: 'response', deleted: true };
  }

  private previous(id: string, owner: string): StoredResponse {
    if (!id.startsWith('resp_')) throw new InvalidRequestError(`previous_response_id must be a response id (resp_...), got "${id}"`);
    const rec = this.store.get(id, owner);
    if (!rec) throw new ResponseNotFoundError(id);
    return rec;
  }

  /** Frees a record's context; a failure is logged, never surfaced (the record is gone either way). */
  private async drop(rec: StoredResponse): Promise<void> {
    const ctx = rec.context;
    if (!ctx) return;
    await this.locks.run(rec.response.id, () => this.engine.dropContext(ctx, rec.owner)).catch((err) => {
      this.log.warn(`could not free the context of ${rec.response.id}: ${(err as Error).message}`);
    });
  }
}

/** The answer as the next turn's template sees it: text plus tool calls. */
function assistantTurn(r: WireResponse): CoreMessage {
  const msg: CoreMessage = { role: 'assistant', content: '' };
  for (const item of r.output) {
    if (item.type === 'message') msg.content += item.content.map((p) => p.text).join('');
    else if (item.type === 'reasoning') msg.reasoning_content = (msg.reasoning_content ?? '') + item.content.map((p) => p.text).join('');
    else (msg.tool_calls ??= []).push({ id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } });
  }
  return msg;
}

function baseResponse(d: ResponsesRequestDto, handle: GenerationHandle, maxTokens: number): WireResponse {
  return {
    id: newId('resp_'),
    object: 'response',
    created_at: nowSeconds(),
    status: 'in_progress',
    error: null,
    incomplete_details: null,
    instructions: d.instructions ?? null,
    max_output_tokens: maxTokens,
    model: handle.modelName,
    output: [],
    parallel_tool_calls: d.parallel_tool_calls ?? false,
    previous_response_id: d.previous_response_id ?? null,
    store: d.store ?? true,
    temperature: d.temperature ?? null,
    top_p: d.top_p ?? null,
    text: { format: (d.text?.format as Record<string, unknown> | undefined) ?? { type: 'text' } },
    tool_choice: d.tool_choice ?? 'auto',
    tools: d.tools ?? [],
    truncation: 'disabled',
    metadata: d.metadata ?? {},
    usage: null,
  };
}
