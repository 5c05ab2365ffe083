import { Inject, Injectable } from '@nestjs/common';
import { RequestScope } from '../../engine/src/core/generation-request';
import { NextTokenScorer } from '../../engine/src/decisions/next-token-scorer';
import { Answer, answerOf } from './decision-answers';
import { decisionMessages, stateJson } from './decision-prompts';
import { checkState, KeyOrder, parseQuestions } from './questions';
import { DecisionRequestDto } from './protocol/decision.dto';

export interface Decision {
  model: string;
  /** Per question, in the order sent. */
  answers: Array<[string, Answer]>;
  usage: { input_tokens: number; output_tokens: number };
  /** Positions the engine decoded (X-Svc-Evaluated-Tokens): the state once, then each question's rest. */
  evaluatedTokens: number;
}

/**
 * The decision object's JSON, its answers in the order sent: a JavaScript object would list
 * integer names ("2", "1") first and ascending, whatever the body's order.
 */
export function decisionJson(d: Decision): string {
  const answers = d.answers.map(([name, a]) => `${JSON.stringify(name)}:${JSON.stringify(a)}`).join(',');
  return `{"model":${JSON.stringify(d.model)},"answers":{${answers}},"usage":${JSON.stringify(d.usage)}}`;
}

/** Probability-based decisions: every question's prompt scored at its answer's first token, nothing generated. */
@Injectable()
export class SystemOneService {
  constructor(@Inject(NextTokenScorer) private readonly scorer: NextTokenScorer) {}

  /** `order`: the body's key order (see parseQuestions). */
  async decide(dto: DecisionRequestDto, scope: RequestScope, order?: KeyOrder): Promise<Decision> {
    // Everything the body can get wrong is refused before a model is touched.
    const state = checkState(dto.state);
    const questions = parseQuestions(dto.questions, order);
    const r = await this.scorer.score({
      model: dto.model ?? '',
      keepAlive: dto.keep_alive,
      owner: scope.owner ?? '',
      signal: scope.signal,
      prompts: questions.map((q) => ({ label: q.name, messages: decisionMessages(state, q), options: q.options.map((o) => o.letter), data: stateJson(state) })),
    });
    const answers = questions.map((q, i): [string, Answer] => [q.name, answerOf(q, r.probabilities[i])]);
    const input = r.promptTokens.reduce((s, n) => s + n, 0);
    return { model: r.modelName, answers, usage: { input_tokens: input, output_tokens: 0 }, evaluatedTokens: r.evaluatedTokens };
  }
}
