/**
 * The scheduler on the real engine (stories260K, CPU addon), with a context whose KV cache
 * does not continue its tokens: llama.cpp refuses a whole batch over such a sequence, which
 * failed every request in the step. Only that request may fail; the others decode on.
 */
import { NativeContext, NativeModel } from '../../libs/engine/src/backend/native-addon';
import { GenerationEvent } from '../../libs/engine/src/core/generation-events';
import { Scheduler } from '../../libs/engine/src/scheduler/scheduler';
import { SequenceSpec } from '../../libs/engine/src/scheduler/sequence';
import { loadEngineModel } from './helpers/engine';
import { fixtureModel, STORIES } from './helpers/fixtures';

jest.setTimeout(120_000);

async function drain(events: AsyncIterable<GenerationEvent>): Promise<{ text: string; error?: Error }> {
  let text = '';
  try {
    for await (const ev of events) if (ev.type === 'delta') text += ev.text;
  } catch (err) {
    return { text, error: err as Error };
  }
  return { text };
}

describe('a request over a damaged context fails alone', () => {
  let model: NativeModel;
  let ctx: NativeContext;
  let sched: Scheduler;

  beforeAll(async () => {
    model = await loadEngineModel(fixtureModel(STORIES));
    ctx = await model.createContext({ nCtx: 4096, nBatch: 512, nUbatch: 512, nSeqMax: 32, nThreads: 2, nThreadsBatch: 2 });
    sched = new Scheduler(model, ctx, { concurrency: 4, queueLimit: 8, nBatch: 512, nCtxSeq: 1024, cacheSlots: 0, cachePositions: 1024 });
  });
  afterAll(async () => {
    await sched?.drain();
    ctx?.dispose();
  });

  const spec = (prompt: Int32Array, extra: Partial<SequenceSpec> = {}): SequenceSpec => ({
    modelName: 'stories260K',
    promptTokens: prompt,
    sampler: sched.sampler({ temperature: 0 }),
    maxTokens: 12,
    stop: [],
    logprobs: 0,
    retainPrefix: false,
    ...extra,
  });

  it('fails the damaged one with a 400 and decodes the others as they decode alone', async () => {
    const prompt = model.tokenizeSync('Once upon a time', true, false);
    const alone = await drain(sched.submit(spec(prompt)));
    expect(alone.error).toBeUndefined();

    // A context that holds its first tokens' cells but claims one more: its next batch
    // starts a position past the last cell, which llama.cpp refuses.
    const held = model.tokenizeSync('Once upon a time, there was', true, false);
    const seq = await sched.exclusive(() => sched.allocSeq()!);
    const r = await ctx.step(
      { tokens: held.slice(0, -1), pos: Int32Array.from(held.slice(0, -1), (_, i) => i), seq: Int32Array.from(held.slice(0, -1), () => seq), logits: new Uint8Array(held.length - 1) },
      [],
    );
    expect(r.status).toBe(0);
    let released: number | undefined;
    const session = { seq, held, onRelease: (h: Int32Array) => (released = h.length) };

    const [good, bad, good2] = await Promise.all([
      drain(sched.submit(spec(prompt))),
      drain(sched.submit(spec(Int32Array.from([...held, ...model.tokenizeSync(' a', false, false)]), { session }))),
      drain(sched.submit(spec(prompt))),
    ]);
    expect(bad.error?.message).toBe("this context's KV state does not continue its tokens (a damaged snapshot or import): restore it from a good file or delete it");
    expect((bad.error as { status?: number }).status).toBe(400);
    expect(released).toBeDefined();
    if (good.error || good2.error) throw good.error ?? good2.error;
    expect([good, good2]).toEqual([alone, alone]);
  });
});
