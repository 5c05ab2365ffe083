import { Inject, Injectable } from '@nestjs/common';
import { RequestScope } from '../../engine/src/core/generation-request';
import { NextTokenScorer } from '../../engine/src/decisions/next-token-scorer';
import { Answer, answerOf } from './decision-answers';
import { decisionMessages } from './decision-prompts';
import { checkState, parseQuestions } from './questions';
import { DecisionRequestDto } from './protocol/decision.dto';

export interface Decision {
  body: { model: string; answers: Record<string, Answer>; usage: { input_tokens: number; output_tokens: number } };
  /** Positions the engine decoded (X-Svc-Evaluated-Tokens): the state once, then each question's rest. */
  evaluatedTokens: number;
}

/** Probability-based decisions: every question's prompt scored at its answer's first token, nothing generated. */
@Injectable()
export class SystemOneService {
  constructor(@Inject(NextTokenScorer) private readonly scorer: NextTokenScorer) {}

  async decide(dto: DecisionRequestDto, scope: RequestScope): Promise<Decision> {
    // Everything the body can get wrong is refused before a model is touched.
    const state = checkState(dto.state);
    const questions = parseQuestions(dto.questions);
    const r = await this.scorer.score({
      model: dto.model ?? '',
      keepAlive: dto.keep_alive,
      owner: scope.owner ?? '',
      signal: scope.signal,
      prompts: questions.map((q) => ({ label: q.name, messages: decisionMessages(state, q), options: q.options.map((o) => o.letter) })),
    });
    // Own properties whatever the name (a question may be called "__proto__").
    const answers: Record<string, Answer> = {};
    questions.forEach((q, i) => Object.defineProperty(answers, q.name, { value: answerOf(q, r.probabilities[i]), enumerable: true, writable: true, configurable: true }));
    const input = r.promptTokens.reduce((s, n) => s + n, 0);
    return { body: { model: r.modelName, answers, usage: { input_tokens: input, output_tokens: 0 } }, evaluatedTokens: r.evaluatedTokens };
  }
}
