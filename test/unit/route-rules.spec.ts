import { classifyByRules, nonLatinShare } from '../../libs/route/src/classify/rules-classifier';
import { TRAINING_EXAMPLES } from '../../libs/route/src/classify/training-examples';
import { TEXT_CATEGORIES } from '../../libs/route/src/categories';
import { HELD_OUT } from '../fixtures/route-heldout';

describe('route: rules classifier', () => {
  it.each([
    ['code', 'Here is my code:\n```js\nconst a = 1;\n```\nwhy is it slow?'],
    ['code', 'Traceback (most recent call last):\n  File "x.py", line 3\nValueError: bad'],
    ['code', 'write a python function that sorts a list of dicts by a key'],
    ['reasoning', 'Prove that 17 is prime, step by step.'],
    ['reasoning', 'What is 12 * 17 + 3?'],
    ['multilingual', '这个句子是什么意思？请解释。'],
    ['multilingual', 'Translate "good night" into German.'],
    ['multilingual', 'Je voudrais savoir pour la réunion et les documents qui sont dans le dossier.'],
    ['quick-chat', 'hello!'],
    ['quick-chat', 'thanks so much'],
    ['general', 'What are some good books about the history of Rome?'],
    ['general', 'Tell me about whales.'],
  ])('%s: %s', (category, text) => {
    expect(classifyByRules(text).category).toBe(category);
  });

  it('says why, and gives general a middling confidence when nothing matched', () => {
    const code = classifyByRules('```\nint main() { return 0; }\n```');
    expect(code.reason).toMatch(/^keywords: a code block/);
    expect(code.confidence).toBeGreaterThan(0.5);
    expect(code.confidence).toBeLessThanOrEqual(0.95);
    expect(classifyByRules('What are some good books about the history of Rome?')).toEqual({ category: 'general', confidence: 0.5, reason: 'no category keywords' });
  });

  it('a short word beside another category does not make it small talk', () => {
    expect(classifyByRules('solve 2 + 2').category).toBe('reasoning');
  });

  it('measures the share of letters outside the Latin script', () => {
    expect(nonLatinShare('hello')).toBe(0);
    expect(nonLatinShare('日本')).toBe(1);
    expect(nonLatinShare('ab日本')).toBe(0.5);
    expect(nonLatinShare('123 !?')).toBe(0);
  });

  it('reports its accuracy on the held-out prompts and on the training prompts (keywords: a floor, not the embedding classifier)', () => {
    const heldOut = HELD_OUT.filter(([c, t]) => classifyByRules(t).category === c).length / HELD_OUT.length;
    const train = TEXT_CATEGORIES.flatMap((c) => TRAINING_EXAMPLES[c].map((t) => [c, t] as const));
    const trained = train.filter(([c, t]) => classifyByRules(t).category === c).length / train.length;
    // eslint-disable-next-line no-console
    console.log(`rules classifier: held-out accuracy ${(heldOut * 100).toFixed(0)}% (${HELD_OUT.length} prompts), training prompts ${(trained * 100).toFixed(0)}% (${train.length})`);
    for (const [c, t] of HELD_OUT) {
      const got = classifyByRules(t).category;
      // eslint-disable-next-line no-console
      if (got !== c) console.log(`  miss: ${c} -> ${got}: ${t}`);
    }
    expect(heldOut).toBeGreaterThanOrEqual(0.7);
  });
});
