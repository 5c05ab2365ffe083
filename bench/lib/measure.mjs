// The workload (prompts) and the measurements: warm-up, prefill, TTFT, decode, concurrent
// streams, and their medians.
import { serverStats } from './client.mjs';

// Filler text for prompts (tokenises reasonably on both the SentencePiece stories vocab
// and the qwen2 BPE vocab).
const STORY = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog, Max. ' +
  'One day, Lily and Max found a big red ball under a tree. They played with the ball all day long, and when the sun went down, ' +
  'they went home happy and tired. Her mom made a warm soup, and Lily told her all about the ball and the tree. ';

const SHORT_PROMPT = 'Once upon a time';
const CONC_PROMPTS = [
  'Once upon a time, there was a little boy named Tim.',
  'One day, a cat sat on a mat in the sun.',
  'The little bird wanted to fly over the big hill.',
  'Sara had a red car. She liked to play with it.',
  'Ben and his mom went to the store to buy milk.',
  'There was a big tree in the garden. It was very old.',
  'Lily saw a shiny stone near the river.',
  'The dog ran fast to catch the ball.',
];

export const median = (xs) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return null;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

export const range = (xs) => {
  const s = xs.filter((x) => Number.isFinite(x));
  return s.length ? [Math.min(...s), Math.max(...s)] : null;
};

// Every request gets a distinct leading tag so no server can reuse a cached prefix.
let nonce = 0;
const tag = () => `[${++nonce}] `;

function repeatTo(nRepeats) {
  return STORY.repeat(Math.max(1, nRepeats)).trim();
}

/** Pick a prompt of about `target` tokens by asking the server for prompt_tokens. */
async function calibratePrompt(client, port, target, timeoutMs) {
  let reps = 4;
  for (let i = 0; i < 4; i++) {
    const r = await client.streamCompletion(port, client.completionBody(tag() + repeatTo(reps), 1), timeoutMs);
    if (!r.promptTokens) return { reps, tokens: null };
    const perRep = r.promptTokens / reps;
    const want = Math.max(1, Math.round(target / perRep));
    if (want === reps) return { reps, tokens: r.promptTokens };
    reps = want;
  }
  return { reps, tokens: null };
}

/** Warm-up, then `reps` repetitions of every measurement into `raw`. */
export async function measureServer(client, port, cfg, opts, calib, reps, raw) {
  const { streamCompletion, completionBody } = client;
  const timeoutMs = opts.timeoutS * 1000;
  // warm-up (not counted): every path the measurements take, the request path
  // --warmup times or for --warmup-s seconds, whichever ends first (V8 compiles a
  // function to optimized code only after it ran many times, and on svc's request
  // path it goes on marking functions for ~2000 requests), so a JIT-compiled server
  // is measured warm, as one that has been serving is, like a native one. The time
  // cap keeps a slow model's warm-up short: there a request's JS is a small part of
  // its time.
  await streamCompletion(port, completionBody(tag() + SHORT_PROMPT, 8), timeoutMs);
  const warmEnd = performance.now() + opts.warmupS * 1000;
  for (let i = 0; i < opts.warmup && performance.now() < warmEnd; i++) await streamCompletion(port, completionBody(tag() + SHORT_PROMPT, 1), timeoutMs);
  for (let i = 0; i < Math.min(2, opts.warmup); i++) {
    await streamCompletion(port, completionBody(tag() + repeatTo(2), 32), timeoutMs);
    await Promise.all(Array.from({ length: opts.parallel }, (_, k) =>
      streamCompletion(port, completionBody(tag() + CONC_PROMPTS[k % CONC_PROMPTS.length], 16), timeoutMs)));
  }

  if (!calib.prefillReps) {
    const c = await calibratePrompt(client, port, cfg.prefillTokens, timeoutMs);
    calib.prefillReps = c.reps;
  }
  const longPrompt = repeatTo(calib.prefillReps);
  const decodeN = opts.decodeTokens ?? cfg.decodeTokens;
  const concN = opts.concTokens ?? cfg.concTokens;

  for (let rep = 0; rep < reps; rep++) {
    // 1. prefill: ~512-token prompt, one generated token; prompt tokens / time to first token
    {
      const r = await streamCompletion(port, completionBody(tag() + longPrompt, 1), timeoutMs);
      raw.prefill.push({ promptTokens: r.promptTokens, ttftMs: r.tFirst, tps: r.promptTokens ? r.promptTokens / (r.tFirst / 1000) : null, server: r.serverTimings?.prompt_per_second ?? null });
    }
    // 2. TTFT for a short prompt, --ttft-samples times (one request is a few ms: a single one is mostly noise)
    for (let k = 0; k < opts.ttftSamples; k++) {
      const r = await streamCompletion(port, completionBody(tag() + SHORT_PROMPT, 1), timeoutMs);
      // svc reports its own share: admission to first token (svc_prefill_ms); the rest is HTTP and the request pipeline.
      raw.ttft.push({ promptTokens: r.promptTokens, ttftMs: r.tFirst, serverPrefillMs: r.usage?.svc_prefill_ms ?? r.serverTimings?.prompt_ms ?? null });
    }
    // 3. single-stream decode, --decode-samples times: tokens after the first / time from first to last token
    for (let k = 0; k < opts.decodeSamples; k++) {
      const before = await serverStats(port);
      const r = await streamCompletion(port, completionBody(tag() + SHORT_PROMPT, decodeN), timeoutMs);
      const after = await serverStats(port);
      const dt = (r.tLast - r.tFirst) / 1000;
      // The engine's own share per generated token (llama-server: its timings; svc: /v1/stats decode_ms + sample_ms).
      const engineMsPerToken = r.serverTimings?.predicted_per_token_ms ??
        (before && after && r.completionTokens ? (after.decode_ms + after.sample_ms - before.decode_ms - before.sample_ms) / r.completionTokens : null);
      // svc: how long its engine sat idle between steps while this stream decoded (round trips through JS).
      const engineIdleMsPerToken = before && after && typeof after.decode_idle_ms === 'number' && r.completionTokens ? (after.decode_idle_ms - before.decode_idle_ms) / r.completionTokens : null;
      raw.decode.push({ completionTokens: r.completionTokens, finishReason: r.finishReason, seconds: dt, tps: r.completionTokens > 1 && dt > 0 ? (r.completionTokens - 1) / dt : null, server: r.serverTimings?.predicted_per_second ?? null, engineMsPerToken, engineIdleMsPerToken });
    }
    // 4. N concurrent streams: total completion tokens / wall time
    {
      const t0 = performance.now();
      const rs = await Promise.all(Array.from({ length: opts.parallel }, (_, k) =>
        streamCompletion(port, completionBody(tag() + CONC_PROMPTS[k % CONC_PROMPTS.length], concN), timeoutMs)));
      const wall = (performance.now() - t0) / 1000;
      const total = rs.reduce((s, r) => s + r.completionTokens, 0);
      raw.concurrent.push({ streams: rs.length, completionTokens: total, seconds: wall, tps: total / wall, maxTtftMs: Math.max(...rs.map((r) => r.tFirst)) });
    }
  }
}

/** Medians (and spreads) of everything measured. */
export function summarize(raw, opts) {
  return {
    prefill_tps: median(raw.prefill.map((x) => x.tps)),
    prefill_prompt_tokens: median(raw.prefill.map((x) => x.promptTokens)),
    decode_tps: median(raw.decode.map((x) => x.tps)),
    decode_tokens: median(raw.decode.map((x) => x.completionTokens)),
    // engine time per generated token (decode + sample), as the server reports it
    engine_ms_per_token: median(raw.decode.map((x) => x.engineMsPerToken)),
    engine_idle_ms_per_token: median(raw.decode.map((x) => x.engineIdleMsPerToken)),
    ttft_ms: median(raw.ttft.map((x) => x.ttftMs)),
    // The short prompt's TTFT split: the server's own prefill share (svc: admission to first
    // token; llama-server: prompt_ms) and the rest (HTTP, request path, client).
    ttft_engine_ms: median(raw.ttft.map((x) => x.serverPrefillMs)),
    ttft_rest_ms: median(raw.ttft.map((x) => (x.serverPrefillMs == null ? null : x.ttftMs - x.serverPrefillMs))),
    [`agg${opts.parallel}_tps`]: median(raw.concurrent.map((x) => x.tps)),
    // the server process's peak resident memory over a whole repetition (weights, KV cache, runtime)
    peak_rss_mib: median(raw.peakRssMiB),
    // of which on 2 MiB pages at the end (hugePagesMiB in servers.mjs): decode speed follows it
    huge_pages_mib: median(raw.hugePagesMiB),
    // [min, max] over the repetitions, to show how noisy the machine was
    spread: {
      prefill_tps: range(raw.prefill.map((x) => x.tps)),
      decode_tps: range(raw.decode.map((x) => x.tps)),
      ttft_ms: range(raw.ttft.map((x) => x.ttftMs)),
      [`agg${opts.parallel}_tps`]: range(raw.concurrent.map((x) => x.tps)),
    },
    raw,
  };
}
