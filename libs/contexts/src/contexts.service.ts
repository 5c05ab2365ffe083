import { Inject, Injectable } from '@nestjs/common';
import { SERVER_CONFIG, ServerConfig, VERSION } from '../../../apps/server/src/config/server-config';
import { ContextBusyError, ContextNotFoundError } from '../../engine/src/contexts/context-errors';
import { planMedia } from '../../engine/src/media/media-plan';
import { MAX_PICTURES } from '../../engine/src/media/media-thinning';
import { mediaSignal } from '../../engine/src/media/media-tools';
import { KvContext } from '../../engine/src/contexts/kv-context';
import { EngineError, InvalidRequestError } from '../../engine/src/core/errors';
import { CoreMessage } from '../../engine/src/core/generation-request';
import { LoadedModel } from '../../engine/src/models/loaded-model';
import { ModelManager } from '../../engine/src/models/model-manager';
import { withModelSystem } from '../../engine/src/models/model-defaults';
import { renderPrompt } from '../../engine/src/prompt/prompt-renderer';
import { toCoreMessage } from '../../dialects/src/openai/mapping/chat-request.mapper';
import { checkMessages } from '../../dialects/src/shared/to-core';
import { ownerKey, RequestIdentity } from '../../http/src/identity';
import { decodeState, encodeState, firstCachePositions, Precision, statePositions } from './snapshot/kv-quant';
import { decodeSnapshot, encodeSnapshot, FileKind, SnapshotFile, SnapshotFormatError } from './snapshot/snapshot-file';

const PRECISIONS: Precision[] = ['f32', 'vq8', 'q8'];

/** The contexts feature: spec semantics and file formats over the engine's ContextRegistry. */
@Injectable()
export class ContextsService {
  constructor(
    @Inject(ModelManager) private readonly models: ModelManager,
    @Inject(SERVER_CONFIG) private readonly config: ServerConfig,
  ) {}

  async create(model: string, who: RequestIdentity, body: { prompt?: unknown; messages?: unknown }, signal?: AbortSignal): Promise<KvContext> {
    if (body.prompt != null && body.messages != null) throw new InvalidRequestError('send prompt or messages, not both');
    const lm = await this.models.acquire(model);
    const read = await this.tokensOf(lm, model, body, true);
    const tokens = read?.tokens;
    // As for a request's prompt: a context that holds no room for a token could never generate.
    const limit = lm.scheduler.nCtxSeq;
    if (tokens && tokens.length + 1 > limit) throw new InvalidRequestError(`the prompt is ${tokens.length} tokens; ${lm.name} holds ${limit} positions per context`);
    return lm.contexts.create(ownerKey(who), tokens, '', { signal, answerFrom: read?.answerFrom });
  }

  async list(model: string, who: RequestIdentity): Promise<KvContext[]> {
    const lm = await this.models.acquire(model);
    return lm.contexts.list(ownerKey(who));
  }

  async find(model: string, who: RequestIdentity, id: string): Promise<{ lm: LoadedModel; ctx: KvContext }> {
    const lm = await this.models.acquire(model);
    const ctx = lm.contexts.get(id, ownerKey(who));
    if (!ctx) throw new ContextNotFoundError(id);
    return { lm, ctx };
  }

  async fork(model: string, who: RequestIdentity, id: string, nRaw: string | undefined): Promise<{ children: KvContext[]; ms: number }> {
    // Digits only: Number() read "1e1" as 10, "0x2" as 2 and " " as 0.
    // A negative count is a number out of range, not "not a number".
    const n = nRaw === undefined || nRaw === '' ? 1 : /^-?\d{1,6}$/.test(nRaw) ? Number(nRaw) : NaN;
    if (!Number.isInteger(n)) throw new InvalidRequestError(`n must be a number, got ${nRaw}`);
    if (n < 1 || n > 64) throw new InvalidRequestError(`n must be from 1 to 64, got ${n}`);
    const { lm, ctx } = await this.find(model, who, id);
    return lm.contexts.fork(ctx, n);
  }

  async truncate(model: string, who: RequestIdentity, id: string, body: { tokens?: unknown; messages?: unknown }): Promise<KvContext> {
    const { lm, ctx } = await this.find(model, who, id);
    // A request generating on it holds it (the spec's 409 for a write), whatever the target.
    if (ctx.busy) throw new ContextBusyError();
    let target: number;
    if (body.tokens != null) {
      if (typeof body.tokens !== 'number' || !Number.isInteger(body.tokens)) throw new InvalidRequestError('cannot parse request: tokens must be an integer');
      target = body.tokens;
    } else if (body.messages != null) {
      target = (await this.tokensOf(lm, model, { messages: body.messages }, false))?.tokens.length ?? 0;
    } else {
      throw new InvalidRequestError('send tokens or messages');
    }
    if (target < 0) throw new InvalidRequestError(`cannot truncate to ${target} positions`);
    if (target > ctx.tokens.length) throw new InvalidRequestError(`context holds ${ctx.tokens.length} positions; cannot truncate to ${target}`);
    return lm.contexts.truncate(ctx, target);
  }

  async remove(model: string, who: RequestIdentity, id: string): Promise<void> {
    const { lm, ctx } = await this.find(model, who, id);
    await lm.contexts.delete(ctx);
  }

  /** A snapshot (.svcctx) or export (.svcx) file of a context. */
  async save(kind: FileKind, model: string, who: RequestIdentity, id: string, precisionRaw: string | undefined): Promise<Buffer> {
    const precision = (precisionRaw ?? 'f32') as Precision;
    if (!PRECISIONS.includes(precision)) throw new InvalidRequestError('precision must be f32, vq8 or q8');
    const { lm, ctx } = await this.find(model, who, id);
    const { state, tokens, answerFrom } = await lm.contexts.readState(ctx);
    let payload: Buffer;
    try {
      payload = encodeState(state, precision);
    } catch (err) {
      throw new InvalidRequestError(`precision ${precision} is not available for this model's KV layout: ${(err as Error).message}`);
    }
    const header = {
      svc_version: VERSION,
      model: lm.name,
      weights: `sha256:${lm.contentHash}`,
      layout: layoutOf(lm),
      precision,
      created: Math.floor(Date.now() / 1000),
      ...(answerFrom !== undefined ? { answer_from: answerFrom } : {}),
      ...(kind === 'export' ? { owner: who.owner, marking: who.marking, context: ctx.id } : {}),
    };
    return encodeSnapshot(kind, header, tokens, payload, this.config.features.contextKey);
  }

  async restore(model: string, who: RequestIdentity, body: Buffer): Promise<KvContext> {
    // The server's policy, not the request's: without a header (-require-classification=false) it is still refused.
    if (who.marking || this.config.features.classification) throw new EngineError('restore of a bare snapshot is refused under classification markings; use export and import', 403);
    const lm = await this.models.acquire(model);
    const file = this.open('snapshot', body);
    this.checkLegacy(file, who);
    const here = `sha256:${lm.contentHash}`;
    const there = file.header.weights ?? file.header.layout;
    const same = file.header.weights ? file.header.weights === here : file.header.layout === layoutOf(lm);
    if (!same) throw new EngineError(`kv: snapshot was taken with different weights: snapshot holds ${there}, this cache holds ${here}`, 409);
    return lm.contexts.restore(ownerKey(who), file.tokens, this.stateOf(lm, file), file.header.answer_from);
  }

  async import(model: string, who: RequestIdentity, body: Buffer): Promise<{ ctx: KvContext; from: string }> {
    const lm = await this.models.acquire(model);
    const file = this.open('export', body);
    this.checkLegacy(file, who);
    if ((file.header.owner ?? '') !== who.owner || (file.header.marking ?? '') !== who.marking) {
      throw new EngineError('the context belongs to another caller, or to you at another marking', 403);
    }
    const here = `sha256:${lm.contentHash}`;
    if (file.header.layout !== layoutOf(lm)) {
      throw new EngineError(`kv: snapshot was taken with different weights: snapshot holds ${file.header.weights ?? file.header.layout}, this cache holds ${here}`, 409);
    }
    if (file.header.weights && file.header.weights !== here) {
      throw new EngineError(`this context was computed by weights with content ${file.header.weights}; this model's content is ${here}`, 409);
    }
    const ctx = await lm.contexts.restore(ownerKey(who), file.tokens, this.stateOf(lm, file), file.header.answer_from);
    return { ctx, from: file.header.context ?? '' };
  }

  private open(kind: FileKind, body: Buffer): SnapshotFile {
    if (!Buffer.isBuffer(body)) throw new InvalidRequestError(`send the ${kind} file as the request body (application/octet-stream)`);
    let file: SnapshotFile;
    try {
      file = decodeSnapshot(kind, body, this.config.features.contextKey);
    } catch (err) {
      if (err instanceof SnapshotFormatError) throw new EngineError(err.message, err.status);
      throw err;
    }
    const h = file.header as Partial<Record<keyof SnapshotFile['header'], unknown>> | null;
    const strings = ['layout', 'weights', 'owner', 'marking', 'context'] as const;
    if (!h || typeof h !== 'object' || Array.isArray(h) || strings.some((k) => h[k] !== undefined && typeof h[k] !== 'string')) {
      throw new InvalidRequestError('corrupt context file: its header is not a context header');
    }
    const from = h.answer_from;
    if (from !== undefined && (typeof from !== 'number' || !Number.isInteger(from) || from < 0)) throw new InvalidRequestError('corrupt context file: answer_from must be a position (an integer from 0)');
    if (!PRECISIONS.includes(h.precision as Precision)) throw new InvalidRequestError(`corrupt context file: unknown precision ${JSON.stringify(h.precision)}`);
    return file;
  }

  /**
   * The KV state a file holds, checked before llama.cpp reads it: a cell for each of the file's
   * tokens, at positions 0..n-1, within the positions a context of this model holds. llama.cpp
   * sizes a batch by the state's cell count and trusts its positions; a forged file got the
   * server killed for memory, or restored a context whose next decode failed the whole step.
   */
  private stateOf(lm: LoadedModel, file: SnapshotFile): Buffer {
    let state: Buffer;
    try {
      state = decodeState(file.payload, file.header.precision);
    } catch (err) {
      throw new InvalidRequestError(`corrupt context file: ${(err as Error).message}`);
    }
    const n = file.tokens.length;
    const limit = lm.scheduler.nCtxSeq;
    if (n + 1 > limit) throw new InvalidRequestError(`the context is ${n} tokens; ${lm.name} holds ${limit} positions per context`);
    // The tokens are matched against prompts and turned back into text: each must be one of the model's.
    const nVocab = lm.native.info.nVocab;
    const stray = file.tokens.findIndex((t) => t < 0 || t >= nVocab);
    if (stray >= 0) throw new InvalidRequestError(`corrupt context file: token ${stray} is ${file.tokens[stray]}, not an id of this model's vocabulary (0..${nVocab - 1})`);
    let positions: Int32Array;
    try {
      positions = statePositions(state);
    } catch (err) {
      // f32 states of layouts the walk does not know (two caches, sliding-window or recurrent
      // ones) are saved without it: there the first cache's cells are checked, at most one per
      // token, each at a distinct position below n (a recurrent cache keeps one, at the last).
      const readings = file.header.precision === 'f32' ? firstCachePositions(state) : [];
      if (readings.length === 0) throw new InvalidRequestError(`corrupt context file: ${(err as Error).message}`);
      const problems = readings.map((r) => (r.length > n ? `its KV state holds more cells than its ${n} tokens` : positionProblem(r, n)));
      if (problems.every((p) => p !== undefined)) throw new InvalidRequestError(`corrupt context file: ${problems[0]}`);
      return state;
    }
    if (positions.length !== n) throw new InvalidRequestError(`corrupt context file: its KV state holds ${positions.length} cells for ${n} tokens`);
    const problem = positionProblem(positions, n);
    if (problem) throw new InvalidRequestError(`corrupt context file: ${problem}`);
    return state;
  }

  /**
   * Pre-0.3.0 files name weights by layout only. The auth layer decides the
   * policy (refused under -profile enterprise or -classification, unless
   * -allow-legacy-snapshots); a request carrying a marking is refused as well.
   */
  private checkLegacy(file: SnapshotFile, who: RequestIdentity): void {
    if (file.version >= 2 && file.header.weights) return;
    const strict = this.config.auth.refuseLegacySnapshots || (who.marking !== '' && !this.config.features.allowLegacySnapshots);
    if (strict) {
      throw new EngineError('a snapshot from before version 0.3.0 names its weights by layout only; refused here unless the server runs with -allow-legacy-snapshots', 403);
    }
  }

  /**
   * The tokens of a body's prompt or messages, and where the first assistant message begins in
   * them (model-written text a later prompt renders again its own way; KvContext.answerFrom).
   */
  private async tokensOf(lm: LoadedModel, model: string, body: { prompt?: unknown; messages?: unknown }, generationPrompt: boolean): Promise<{ tokens: Int32Array; answerFrom?: number } | undefined> {
    // null is "absent", as in every optional field.
    if (body.prompt != null) {
      if (typeof body.prompt !== 'string') throw new InvalidRequestError('cannot parse request: prompt must be a string');
      return { tokens: await lm.native.tokenize(body.prompt, true, true) };
    }
    if (body.messages != null) {
      if (!Array.isArray(body.messages)) throw new InvalidRequestError('cannot parse request: messages must be an array');
      body.messages.forEach((m: unknown, i: number) => {
        if (!m || typeof m !== 'object' || Array.isArray(m)) throw new InvalidRequestError(`cannot parse request: messages[${i}] must be a message object`);
      });
      // Checked as a chat request checks them: a context is never made of messages chat refuses.
      checkMessages(body.messages as Array<{ role?: unknown }>);
      // A PDF is read as its text, as chat reads it (pages without text are noted, never drawn: a context holds text only).
      const plan = await planMedia((body.messages as Array<Record<string, unknown>>).map(toCoreMessage), { vision: false, signal: mediaSignal(undefined) });
      const { messages } = plan.select(MAX_PICTURES);
      // With the model's SYSTEM, as a chat request renders them: svc_session then continues it.
      const defaults = this.models.catalog.defaults(this.models.catalog.resolve(model));
      // A context is matched by its tokens, which cannot tell two pictures apart: text only, even on a vision model.
      const textOnly = lm.projector ? { refusal: 'contexts hold text only: images cannot be written into a context' } : {};
      const render = (m: CoreMessage[], opened: boolean) => renderPrompt(lm.native, withModelSystem({ kind: 'chat', messages: m, generationPrompt: opened }, defaults), { kind: 'none' }, textOnly).text;
      const tokens = await lm.native.tokenize(render(messages, generationPrompt), true, true);
      return { tokens, answerFrom: this.firstAnswerAt(lm, messages, (m) => render(m, false)) };
    }
    return undefined;
  }

  /**
   * Where the first assistant message begins: after the messages before it (its turn's header is
   * the template's too: a reasoning template writes a last reply's think block in it).
   */
  private firstAnswerAt(lm: LoadedModel, messages: CoreMessage[], before: (m: CoreMessage[]) => string): number | undefined {
    const i = messages.findIndex((m) => m.role === 'assistant');
    if (i < 0) return undefined;
    try {
      return lm.native.tokenizeSync(before(messages.slice(0, i)), true, true).length;
    } catch {
      return 0; // a template that cannot end before an assistant message: the model's text may be anywhere
    }
  }
}

/**
 * The body limit of restore and import: the largest context the model can
 * hold, at f32 (the widest precision), plus its tokens and headers. Read from
 * GGUF metadata, without loading the model.
 */
export function snapshotBodyLimit(kv: Record<string, unknown> | undefined, ctxFlag: number): number {
  const arch = String(kv?.['general.architecture'] ?? '');
  const n = (k: string, d: number) => (typeof kv?.[`${arch}.${k}`] === 'number' ? (kv[`${arch}.${k}`] as number) : d);
  const layers = n('block_count', 32);
  const embd = n('embedding_length', 4096);
  const heads = n('attention.head_count', 32);
  const kvHeads = n('attention.head_count_kv', heads);
  const ctx = Math.min(n('context_length', 4096), ctxFlag > 0 ? ctxFlag : 4096);
  // A head is key_length (value_length) wide where the file says so: n_embd / n_head under-counted
  // models with wider heads (GLM-4.5, Gemma), and their own snapshots were a 413.
  const keyLen = n('attention.key_length', embd / Math.max(1, heads));
  const valueLen = n('attention.value_length', embd / Math.max(1, heads));
  return Math.ceil(layers * ctx * kvHeads * (keyLen + valueLen) * 4) + ctx * 16 + (1 << 20);
}

/** Architecture and shape: identifies weights the way legacy snapshots did. */
export function layoutOf(lm: LoadedModel): string {
  const i = lm.native.info;
  return `${i.architecture}/L${i.nLayer}/E${i.nEmbd}/H${i.nHead}/KV${i.nHeadKv}/V${i.nVocab}`;
}

/** What is wrong with a state's cell positions for a context of n tokens: each within 0..n-1, none twice. */
function positionProblem(positions: Int32Array, n: number): string | undefined {
  const seen = new Uint8Array(n);
  for (const p of positions) {
    if (p < 0 || p >= n || seen[p]) return `its KV state holds position ${p}, not one of 0..${n - 1} once each`;
    seen[p] = 1;
  }
  return undefined;
}
