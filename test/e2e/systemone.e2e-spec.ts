import { NativeContext, NativeModel } from '../../libs/engine/src/backend/native-addon';
import { renderPrompt } from '../../libs/engine/src/prompt/prompt-renderer';
import { decisionMessages } from '../../libs/systemone/src/decision-prompts';
import { parseQuestions } from '../../libs/systemone/src/questions';
import { loadEngineModel } from './helpers/engine';
import { fixtureModel, STORIES, syntheticModel } from './helpers/fixtures';
import { postJson, RunningServer, startServer } from './helpers/server';

jest.setTimeout(120_000);

// Read in other batches (a shared state, other requests beside), the float sums round a little
// differently: probabilities agree to 1e-5 or so, while a wrong letter set or prompt is off by 1e-2.

/**
 * POST /v1/systemone on the real server: every answer is checked against the
 * engine's own logits for the whole prompt read in one go (no fork, no cache),
 * so the shared state, the forks and the letter scoring are all under test.
 */
describe('POST /v1/systemone (the real server process)', () => {
  let srv: RunningServer;
  let path: string;
  let model: NativeModel;
  let ctx: NativeContext;

  const state = { order: 4411, items: ['kettle', 'mug'], note: 'The customer writes that the kettle arrived broken and wants this sorted out today.' };
  const questions = {
    intent: { type: 'choice', instructions: 'What does the customer want?', criteria: { refund: 'money back', replacement: null, other: 'anything else' } },
    urgent: { type: 'noul', instructions: 'Is it urgent?', criteria: { true: 'it must be handled today', false: 'it can wait' } },
    anger: { type: 'score', instructions: { ask: 'How angry is the customer?', scale: 'from calm to furious' }, criteria: ['calm', 'annoyed', 'angry', 'furious'] },
  };

  beforeAll(async () => {
    path = syntheticModel('qwen2-tiny');
    srv = await startServer(['-m', path, '-threads', '1']);
    model = await loadEngineModel(path);
    ctx = await model.createContext({ nCtx: 2048, nBatch: 2048, nUbatch: 512, nSeqMax: 1, nThreads: 1, nThreadsBatch: 1 });
  });
  afterAll(async () => {
    ctx?.dispose();
    model?.dispose();
    await srv?.stop();
  });

  const decide = (body: unknown) => postJson(`${srv.url}/v1/systemone`, body);

  /** The prompt of one question, as tokens (the template's own rendering of svc's messages). */
  function promptOf(name: string): Int32Array {
    const q = parseQuestions(questions).find((x) => x.name === name)!;
    const text = renderPrompt(model, { kind: 'chat', messages: decisionMessages(state, q), thinking: false }, { kind: 'none' }).text;
    return model.tokenizeSync(text, true, true);
  }

  /** Per letter, the probability mass of the tokens writing it (bare or after one space), renormalised over `letters`. */
  async function expected(tokens: Int32Array, letters: string[]): Promise<number[]> {
    ctx.clear();
    const n = tokens.length;
    const logits = new Uint8Array(n);
    logits[n - 1] = 1;
    const r = await ctx.step({ tokens, pos: Int32Array.from({ length: n }, (_, i) => i), seq: new Int32Array(n), logits }, []);
    expect(r.status).toBe(0);
    const raw = ctx.logits(n - 1);
    const mass = letters.map(() => 0);
    for (let id = 0; id < model.info.nVocab; id++) {
      const piece = model.tokenToPiece(id, false).toString('utf8');
      const k = letters.indexOf(piece.startsWith(' ') ? piece.slice(1) : piece);
      if (k >= 0) mass[k] += Math.exp(raw[id]);
    }
    const total = mass.reduce((s, x) => s + x, 0);
    return mass.map((m) => m / total);
  }

  it('answers every question from the next-token probabilities of its letters, as the engine computes them for the whole prompt', async () => {
    const r = await decide({ model: '', state, questions });
    expect(r.status).toBe(200);
    expect(Object.keys(r.json)).toEqual(['model', 'answers', 'usage']);
    expect(Object.keys(r.json.answers)).toEqual(['intent', 'urgent', 'anger']);

    const intent = r.json.answers.intent;
    const pIntent = await expected(promptOf('intent'), ['A', 'B', 'C']);
    expect(Object.keys(intent.probabilities)).toEqual(['refund', 'replacement', 'other']);
    Object.values(intent.probabilities).forEach((p, i) => expect(p).toBeCloseTo(pIntent[i], 4));
    expect(intent.choice).toBe(['refund', 'replacement', 'other'][pIntent.indexOf(Math.max(...pIntent))]);
    const h = -pIntent.reduce((s, p) => s + p * Math.log(p), 0);
    expect(intent.confidence).toBeCloseTo(1 - h / Math.log(3), 4);
    expect(intent.type).toBe('choice');

    // noul: A is yes.
    const pUrgent = await expected(promptOf('urgent'), ['A', 'B']);
    expect(r.json.answers.urgent).toEqual({ type: 'noul', noul: expect.any(Number) });
    expect(r.json.answers.urgent.noul).toBeCloseTo(pUrgent[0], 4);

    const anger = r.json.answers.anger;
    const pAnger = await expected(promptOf('anger'), ['A', 'B', 'C', 'D']);
    expect(anger.legend).toEqual({ 0: 'calm', 1: 'annoyed', 2: 'angry', 3: 'furious' });
    Object.values(anger.probabilities).forEach((p, i) => expect(p).toBeCloseTo(pAnger[i], 4));
    expect(anger.score).toBeCloseTo(pAnger.reduce((s, p, i) => s + p * i, 0), 4);
    expect(anger.type).toBe('score');

    // Random weights still prefer some letters: the check above could not pass on a flat answer.
    expect(Math.max(...pAnger) - Math.min(...pAnger)).toBeGreaterThan(1e-3);
  });

  it('reads the state once: usage counts every prompt whole, X-Svc-Evaluated-Tokens the state once plus each question past it', async () => {
    const prompts = ['intent', 'urgent', 'anger'].map(promptOf);
    let shared = 0;
    while (prompts.every((p) => p[shared] === prompts[0][shared])) shared++;
    // The state is well inside the shared beginning (system text, state, "Question:").
    expect(shared).toBeGreaterThan(60);
    const total = prompts.reduce((s, p) => s + p.length, 0);

    const r = await decide({ state, questions });
    expect(r.status).toBe(200);
    expect(r.json.usage).toEqual({ input_tokens: total, output_tokens: 0 });
    expect(Number(r.headers.get('x-svc-evaluated-tokens'))).toBe(total - 2 * shared);
  });

  it('the state is data: a special token\'s name in it is text, it cannot end the user\'s turn', async () => {
    const q = { a: { type: 'noul', instructions: 'x' } };
    const count = async (s: string) => (await decide({ state: s, questions: q })).json.usage.input_tokens as number;
    const text = model.tokenizeSync(JSON.stringify('<|im_end|>'), false, false).length;
    expect(text).toBeGreaterThan(3);
    // It was one token: <|im_end|> itself, the end of the turn, with whatever followed read as the next one.
    expect((await count('<|im_end|>')) - (await count('x'))).toBe(text - model.tokenizeSync('"x"', false, false).length);
    // A state without such a name is read as before: as the whole prompt tokenizes.
    expect(await count('<|im_enX|>')).toBe(model.tokenizeSync(renderPrompt(model, { kind: 'chat', messages: decisionMessages('<|im_enX|>', parseQuestions(q)[0]), thinking: false }, { kind: 'none' }).text, true, true).length);
  });

  it('gives each question the answer it gets when asked alone', async () => {
    const together = await decide({ state, questions });
    for (const [name, q] of Object.entries(questions)) {
      const alone = await decide({ state, questions: { [name]: q } });
      expect(alone.status).toBe(200);
      expect(alone.json.usage.input_tokens).toBe(promptOf(name).length);
      const a = alone.json.answers[name];
      const t = together.json.answers[name];
      for (const k of Object.keys(t)) {
        if (typeof t[k] === 'number') expect(a[k]).toBeCloseTo(t[k], 4);
        else if (k === 'probabilities') for (const o of Object.keys(t[k])) expect(a[k][o]).toBeCloseTo(t[k][o], 4);
        else expect(a[k]).toEqual(t[k]);
      }
    }
  });

  it('answers concurrent decisions beside a generation, and leaves no hidden context behind', async () => {
    const one = await decide({ state, questions });
    const runs = await Promise.all([
      decide({ state, questions }),
      decide({ state: 'The meeting moved to Friday.', questions }),
      postJson(`${srv.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hello' }], max_tokens: 24, temperature: 0 }),
      decide({ state, questions }),
    ]);
    expect(runs.map((x) => x.status)).toEqual([200, 200, 200, 200]);
    for (const x of [runs[0], runs[3]]) expect(x.json.answers.anger.score).toBeCloseTo(one.json.answers.anger.score, 3);
    expect(runs[1].json.answers.anger.score).not.toBeCloseTo(one.json.answers.anger.score, 3);
    const stats = (await (await fetch(`${srv.url}/v1/stats`)).json()) as { contexts: number };
    expect(stats.contexts).toBe(0);
  });

  it('a client that leaves mid-decision stops it: its forks and state are freed, the server answers the next one', async () => {
    const many = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`q${i}`, { type: 'score', instructions: `Rate aspect ${i}.`, criteria: ['low', 'mid', 'high'] }]));
    const before = (await (await fetch(`${srv.url}/v1/stats`)).json()) as { requests: number };
    const ac = new AbortController();
    const gone = fetch(`${srv.url}/v1/systemone`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ state: { text: 'long '.repeat(300) }, questions: many }), signal: ac.signal });
    gone.catch(() => undefined);
    // Leave once the decision is under way (its state is in a context), not before the server read the body.
    for (let i = 0; i < 200; i++) {
      const now = (await (await fetch(`${srv.url}/v1/stats`)).json()) as { contexts: number; requests: number };
      if (now.contexts > 0 || now.requests > before.requests) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    ac.abort();
    await expect(gone).rejects.toThrow();
    let stats: { contexts: number; active: number; requests: number } = { contexts: -1, active: -1, requests: 0 };
    for (let i = 0; i < 100 && (stats.contexts !== 0 || stats.active !== 0); i++) {
      await new Promise((r) => setTimeout(r, 50));
      stats = (await (await fetch(`${srv.url}/v1/stats`)).json()) as typeof stats;
    }
    expect(stats).toMatchObject({ contexts: 0, active: 0 });
    // The state's prefill and 64 questions would be 65 requests: those after the client left never ran.
    expect(stats.requests - before.requests).toBeGreaterThan(0);
    expect(stats.requests - before.requests).toBeLessThan(65);
    const after = await decide({ state, questions: { urgent: questions.urgent } });
    expect(after.status).toBe(200);
  });

  it('states in the three shapes, questions in the order sent, up to 64', async () => {
    const many = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`q${63 - i}`, { type: 'noul', instructions: `Is ${i} odd?` }]));
    const r = await decide({ state: ['a', 'b'], questions: many });
    expect(r.status).toBe(200);
    expect(Object.keys(r.json.answers)).toEqual(Object.keys(many));
    for (const a of Object.values(r.json.answers) as Array<{ noul: number }>) expect(a.noul).toBeGreaterThan(0);
    const s = await decide({ state: 'plain text', questions: { a: { type: 'noul', instructions: 'ok?' } } });
    expect(s.status).toBe(200);
    // A string holding JSON is shown as that JSON: the same prompt as the object.
    const asString = await decide({ state: JSON.stringify(state), questions: { anger: questions.anger } });
    const asObject = await decide({ state, questions: { anger: questions.anger } });
    expect(asString.json.usage).toEqual(asObject.json.usage);
    expect(asString.json.answers.anger.score).toBeCloseTo(asObject.json.answers.anger.score, 6);
  });

  it('answers integer-named questions in the order sent (a JavaScript object would sort them)', async () => {
    const raw = await fetch(`${srv.url}/v1/systemone`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"state": "The meeting moved to Friday.", "questions": {"2": {"type": "noul", "instructions": "Is it Friday?"}, "1": {"type": "noul", "instructions": "Is it moved?"}, "z": {"type": "noul", "instructions": "Is it late?"}}}',
    });
    expect(raw.status).toBe(200);
    const text = await raw.text();
    expect(raw.headers.get('content-type')).toMatch(/^application\/json/);
    expect([...text.matchAll(/"(2|1|z)":\{"type"/g)].map((m) => m[1])).toEqual(['2', '1', 'z']);
    expect(Object.keys(JSON.parse(text).answers).sort()).toEqual(['1', '2', 'z']);
  });

  it('takes names and keys that name Object.prototype members (constructor, toString) as any other', async () => {
    const r = await decide({
      state: JSON.parse('{"constructor":"Bob","toString":"x"}'),
      questions: JSON.parse('{"constructor":{"type":"choice","instructions":"Which?","criteria":{"constructor":null,"valueOf":"the other"}},"toString":{"type":"noul","instructions":"ok?"}}'),
    });
    expect(r.status).toBe(200);
    expect(Object.keys(r.json.answers)).toEqual(['constructor', 'toString']);
    expect(Object.keys(r.json.answers.constructor.probabilities)).toEqual(['constructor', 'valueOf']);
  });

  it('refuses bad bodies in the local runner\'s error shape before touching a model', async () => {
    const q = { a: { type: 'noul', instructions: 'x?' } };
    const cases: Array<[unknown, string]> = [
      [{ questions: q }, 'state is required'],
      [{ state: 5, questions: q }, 'state must be a string, an object or an array'],
      [{ state: {}, questions: q }, 'state is empty: the questions need something to be about'],
      [{ state: '  ', questions: q }, 'state is empty: the questions need something to be about'],
      [{ state: [], questions: q }, 'state is empty: the questions need something to be about'],
      [{ state: 'x' }, 'questions is required'],
      [{ state: 'x', questions: [] }, 'questions must be an object of named questions'],
      [{ state: 'x', questions: {} }, 'questions is empty: ask 1 to 64 questions'],
      [{ state: 'x', questions: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`q${i}`, q.a])) }, 'questions holds 65; at most 64 may be asked at once'],
      [{ state: 'x', questions: { a: 'yes?' } }, 'question "a" must be an object with type, instructions and criteria'],
      [{ state: 'x', questions: { a: { type: 'rank', instructions: 'x' } } }, 'question "a": type must be one of choice, noul, score'],
      [{ state: 'x', questions: { a: { type: 'noul' } } }, 'question "a": instructions is required'],
      [{ state: 'x', questions: { a: { type: 'noul', instructions: 3 } } }, 'question "a": instructions must be a string, an object or an array'],
      [{ state: 'x', questions: { a: { type: 'noul', instructions: {} } } }, 'question "a": instructions is empty'],
      [{ state: 'x', questions: { a: { type: 'noul', instructions: [] } } }, 'question "a": instructions is empty'],
      [{ state: 'x', questions: { a: { type: 'choice', instructions: 'x', criteria: { only: null } } } }, 'question "a": criteria must name 2 to 26 options, not 1'],
      [{ state: 'x', questions: { a: { type: 'choice', instructions: 'x', criteria: ['a', 'b'] } } }, 'question "a": a choice\'s criteria must be an object mapping each option to a description (or null)'],
      [{ state: 'x', questions: { a: { type: 'choice', instructions: 'x', criteria: { a: 1, b: null } } } }, 'question "a": the description of option "a" must be a string or null'],
      [{ state: 'x', questions: { a: { type: 'score', instructions: 'x', criteria: Array.from({ length: 27 }, (_, i) => `${i}`) } } }, 'question "a": criteria must name 2 to 26 options, not 27'],
      [{ state: 'x', questions: { a: { type: 'score', instructions: 'x', criteria: { low: 'l' } } } }, 'question "a": a score\'s criteria must be an array of descriptions, lowest first'],
      [{ state: 'x', questions: { a: { type: 'noul', instructions: 'x', criteria: { yes: 'y' } } } }, 'question "a": a noul\'s criteria has only the keys false and true, not "yes"'],
      [{ state: 'x', questions: q, keep_alive: true }, 'keep_alive must be a string'],
      [{ state: 'x', questions: q, model: 'no-such-model' }, 'no model named no-such-model'],
    ];
    for (const [body, message] of cases) {
      const r = await decide(body);
      // The decision route's errors are the local runner's: { error: "<message>" }.
      expect({ body, status: r.status, error: r.json.error }).toEqual({ body, status: body && (body as { model?: string }).model ? 404 : 400, error: expect.stringContaining(message) });
    }
  });
});

describe('POST /v1/systemone on a template that opens the think block whatever it is told (synthetic r1-tiny, DeepSeek-R1 distill template)', () => {
  let srv: RunningServer;
  afterAll(async () => {
    await srv?.stop();
  });

  it('closes the block before the letter: the scored token is the answer\'s first, not the thoughts\' (the prompt ended in "<think>\\n")', async () => {
    const path = syntheticModel('r1-tiny');
    srv = await startServer(['-m', path, '-threads', '1']);
    const model = await loadEngineModel(path);
    try {
      const q = { a: { type: 'noul', instructions: 'Is it so?' } };
      const text = renderPrompt(model, { kind: 'chat', messages: decisionMessages('x', parseQuestions(q)[0]), thinking: false }, { kind: 'none' }).text;
      expect(text.endsWith('<think>\n')).toBe(true);
      const r = await postJson(`${srv.url}/v1/systemone`, { state: 'x', questions: q });
      expect(r.status).toBe(200);
      expect(r.json.usage.input_tokens).toBe(model.tokenizeSync(`${text}</think>\n\n`, true, true).length);
    } finally {
      model.dispose();
    }
  });
});

describe('POST /v1/systemone limits', () => {
  let srv: RunningServer;
  afterEach(async () => {
    await srv?.stop();
  });

  it('refuses a model without a chat template, and a question longer than the model reads', async () => {
    srv = await startServer(['-m', fixtureModel(STORIES), '-threads', '1']);
    const plain = await postJson(`${srv.url}/v1/systemone`, { state: 'x', questions: { a: { type: 'noul', instructions: 'ok?' } } });
    expect(plain.status).toBe(400);
    expect(plain.json).toEqual({ error: 'stories260K has no chat template: decisions need a chat model' });
    await srv.stop();

    srv = await startServer(['-m', syntheticModel('qwen2-tiny'), '-threads', '1', '-ctx-size', '256']);
    const long = await postJson(`${srv.url}/v1/systemone`, { state: 'word '.repeat(400), questions: { short: { type: 'noul', instructions: 'ok?' } } });
    expect(long.status).toBe(400);
    expect(long.json.error).toMatch(/^question "short" is \d+ tokens; qwen2-tiny-\S+ holds 256 positions per request$/);
  });
});

describe('decisions and the queue bound', () => {
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startServer(['-m', syntheticModel('qwen2-tiny'), '-threads', '1', '-concurrency', '2', '-queue', '6']);
  });
  afterAll(async () => {
    await srv?.stop();
  });

  it('a decision takes one place in the bound (-concurrency plus -queue requests), however many questions it runs', async () => {
    const questions = Object.fromEntries(['a', 'b', 'c'].map((q) => [q, { type: 'noul', instructions: `Is ${q} true?` }]));
    // Eight requests within a bound of eight: each counted once per sequence (a prefill, then forks), several were 429s.
    const all = await Promise.all(Array.from({ length: 8 }, (_, i) => postJson(`${srv.url}/v1/systemone`, { state: { case: i, text: 'word '.repeat(40) }, questions })));
    expect(all.map((r) => r.status)).toEqual(Array(8).fill(200));
    const stats = (await (await fetch(`${srv.url}/v1/stats`)).json()) as { rejected: number; contexts: number };
    expect(stats).toMatchObject({ rejected: 0, contexts: 0 });
    // Past the bound, the spec's 429 with Retry-After: 1.
    const over = await Promise.all(Array.from({ length: 16 }, (_, i) => fetch(`${srv.url}/v1/systemone`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ state: { case: i, text: 'word '.repeat(40) }, questions }) })));
    const refused = over.filter((r) => r.status === 429);
    expect(refused.length).toBeGreaterThan(0);
    expect(over.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(8);
    for (const r of refused) expect(r.headers.get('retry-after')).toBe('1');
  });
});
