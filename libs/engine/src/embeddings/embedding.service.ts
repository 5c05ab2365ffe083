import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { InvalidRequestError } from '../core/errors';
import { Encoder, EncoderPool } from './encoder-pool';

/** One embedding request, whatever the dialect. */
export interface EmbedRequest {
  /** '' = the server's encoder. */
  model: string;
  /** Non-empty strings (the dialects refuse the rest, each in its own words). */
  inputs: string[];
  /** An input longer than the encoder reads: cut to fit (true), or refused (false). */
  truncate: boolean;
  /** Fewer dimensions: the vector's first ones, normalized again (as OpenAI and the local runner do). */
  dimensions?: number | null;
  /** The client's: inputs not computed yet are dropped when it fires. */
  signal?: AbortSignal;
  /** The local runner's routes: keep_alive as sent (absent: -keep-alive), as on /api/chat. */
  runner?: { keepAlive?: number | string | null };
}

export interface EmbedResult {
  /** The name the request's model resolved to. */
  model: string;
  encoder: Encoder;
  vectors: Float32Array[];
  /** Tokens read, over every input. */
  promptTokens: number;
  /** Whether this request loaded the encoder (local-runner load_duration). */
  loaded: boolean;
}

/** The most strings one request embeds (spec: Limits). */
export const MAX_EMBED_INPUTS = 2048;

/** Embeddings for every dialect: resolve the encoder, tokenize, fit, embed, shorten. */
@Injectable()
export class EmbeddingService implements OnApplicationShutdown {
  constructor(@Inject(EncoderPool) private readonly encoders: EncoderPool) {}

  async embed(req: EmbedRequest): Promise<EmbedResult> {
    if (req.inputs.length > MAX_EMBED_INPUTS) throw new InvalidRequestError(`input holds ${req.inputs.length} strings; at most ${MAX_EMBED_INPUTS} are embedded at once`);
    const { encoder, name, fresh } = await this.encoders.acquire(req.model, 'embed', req.runner);
    return encoder.held(() => this.embedWith(encoder, name, fresh, req));
  }

  /** The encoder is held meanwhile: its keep_alive (another request's 0) cannot free it under this one. */
  private async embedWith(encoder: Encoder, name: string, fresh: boolean, req: EmbedRequest): Promise<EmbedResult> {
    const { nEmbd, nCtx } = encoder.embedder;
    // null is "not sent", as for every optional field (the OpenAI Python client sends dimensions=None so).
    const dims = req.dimensions ?? undefined;
    if (dims !== undefined && !(Number.isInteger(dims) && dims >= 1 && dims <= nEmbd)) {
      throw new InvalidRequestError(`dimensions must be an integer from 1 to ${nEmbd} (${name} writes ${nEmbd}), got ${dims}`);
    }
    // Special tokens in the text are read as such, as llama-server does.
    const lists = await Promise.all(req.inputs.map((text) => encoder.native.tokenize(text, true, true)));
    const closing = lists.some((t) => t.length > nCtx) ? closingToken(await encoder.native.tokenize('', true, true)) : undefined;
    const fitted = lists.map((toks, i) => {
      if (toks.length <= nCtx) return toks;
      if (!req.truncate) throw new InvalidRequestError(`input${req.inputs.length > 1 ? `[${i}]` : ''} is ${toks.length} tokens; ${name} reads at most ${nCtx}`);
      return fitTokens(toks, nCtx, closing);
    });
    const vectors = fitted.length ? await encoder.embed(fitted, req.signal) : [];
    return {
      model: name,
      encoder,
      vectors: dims === undefined || dims === nEmbd ? vectors : vectors.map((v) => shorten(v, dims)),
      promptTokens: fitted.reduce((n, t) => n + t.length, 0),
      loaded: fresh,
    };
  }

  /** Loads the encoder a name stands for (the local runner's empty-input preload). */
  async load(model: string, keepAlive?: number | string | null): Promise<{ model: string; loaded: boolean; loadMs: number }> {
    const { encoder, name, fresh } = await this.encoders.acquire(model, 'embed', { keepAlive });
    return { model: name, loaded: fresh, loadMs: encoder.loadMs };
  }

  onApplicationShutdown(): Promise<void> {
    return this.encoders.close();
  }
}

/** The token the tokenizer closes every text with ([SEP], EOS), if any: what an empty text ends with after its opening. */
function closingToken(empty: Int32Array): number | undefined {
  return empty.length >= 2 ? empty[empty.length - 1] : undefined;
}

/**
 * The first `n` tokens, the closing special token kept last (as sentence-transformers and
 * text-embeddings-inference cut): the model was trained on texts that end with it.
 */
export function fitTokens(toks: Int32Array, n: number, closing?: number): Int32Array {
  const cut = toks.slice(0, n);
  if (closing !== undefined && toks[toks.length - 1] === closing) cut[n - 1] = closing;
  return cut;
}

/** The first `n` dimensions, at unit length again. */
function shorten(v: Float32Array, n: number): Float32Array {
  const out = v.slice(0, n);
  let sum = 0;
  for (const x of out) sum += x * x;
  const norm = Math.sqrt(sum);
  if (norm > 0) for (let i = 0; i < n; i++) out[i] /= norm;
  return out;
}
