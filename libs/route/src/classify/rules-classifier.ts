import { round2, TextCategory } from '../categories';

/**
 * The classifier used when the server has no all-minilm encoder: keyword and pattern points per
 * category, the most points winning. Each rule gives its points once however often it matches,
 * so a long text does not win by repetition; below MIN_POINTS the message is general.
 */

interface Rule {
  category: Exclude<TextCategory, 'general'>;
  points: number;
  /** Said in the reason. */
  what: string;
  test: (text: string, words: string[]) => boolean;
}

/** Points a category needs to win over general. */
const MIN_POINTS = 2;
/** Rules confidence never claims certainty: keywords are a guess. */
const MAX_CONFIDENCE = 0.95;
/** Confidence of general when nothing matched. */
const GENERAL_CONFIDENCE = 0.5;
/** Categories in this order win a tie: the more particular need first. */
const TIE_ORDER: TextCategory[] = ['code', 'reasoning', 'multilingual', 'quick-chat'];

const has = (re: RegExp) => (text: string) => re.test(text);

const PROGRAMMING = /\b(function|functions|def|const|var|lambda|struct|enum|async|await|println|printf|public static|void|npm|pip|git|docker|kubectl|regex|regexp|compile[rsd]?|compiler|debug|debugger|refactor|stack ?trace|segfault|null pointer|exception|unit tests?|api endpoint|sql|select .+ from|python|javascript|typescript|java|rust|golang|kotlin|php|bash|shell script|html|css|json|yaml|algorithm|recursion|regular expression|segmentation fault|kubernetes|k8s|commit|rebase|branch|pull request|loop|big-o|variable|array|linked list|hash ?map|dataframe|pandas|numpy|react|django|flask)\b|#include|\bc\+\+|\bc#(?!\w)|console\.log|node\.js/i;
const CODE_SYMBOLS = /[{};]|=>|->|\(\)|\+\+|[+-]=|!=|==|::|\w+\([^()\s]*\)|\w\[\w*\]/g;
const STACK_TRACE = /Traceback \(most recent call last\)|\b[A-Z]\w+(Exception|Error)\b|^\s+at \S+ \(.+:\d+:\d+\)|\b\w*(Error|Exception): |error\[E\d+\]|undefined is not a function/m;
const MATH_WORDS = /\b(prove|proof|theorem|lemma|derive|derivation|step[- ]by[- ]step|calculate|compute|solve|equation|integral|derivative|probability|expected value|how many|puzzle|riddle|logic(al)?|deduce|infer|reasoning|reason through|work out|optimi[sz]e|maximi[sz]e|minimi[sz]e|percent(age)?|ratio|average|divisible|prime|factorial|matrix|vector|formula|geometry|triangle|algebra|calculus|statistics|sequence|next number|perimeter|area of|premises?|conclusions?|show that|justify|proven|estimate|how long (does|do|will|would)|greater than|less than|sum of|squared|odd numbers|even numbers)\b/i;
const ARITHMETIC = /\d+(\.\d+)?\s*[-+*/×÷^=<>]\s*\d+|\\frac|\\sum|\\int|\$[^$]+\$|\bx\s*[=²^]|\b\d+\s*%/;
const WHY = /\b(why (does|do|is|are|would|did)|explain why|what follows|if .+ then|which (is|of) .+ (larger|bigger|more|less|faster))\b/i;
/** Asking for another language in that language, or naming one in its own words. */
const TRANSLATE_ELSEWHERE = /traduc|tradu[zi]|übersetz|переведи|перевод|翻译|翻訳|번역|in italiano|en (español|inglés|francés|anglais|français|allemand|espagnol)|auf (deutsch|englisch)|nederlands|po polsku|türkçe|português|portugués/i;
/** Letters that mark a language other than English (ñ, ß, ç, ł…) and ones English only borrows (é, ü…). */
const FOREIGN_LETTERS = /[ñßçãõłşığąęőœ¿¡«»]/i;
const ACCENTS = /[éèêàâùûüöäíóúìò]/i;
const TRANSLATE = /\b(translat(e|ion|ing)|how do (you|i) say|in (french|spanish|german|italian|portuguese|chinese|mandarin|japanese|korean|russian|arabic|hindi|turkish|dutch|polish|swedish|greek|hebrew|vietnamese|thai|indonesian)|(french|spanish|german|italian|chinese|japanese|korean|russian|arabic) (word|phrase|sentence|text|version))\b/i;
/** Function words of the most common Latin-script languages besides English. */
const FOREIGN_WORDS = new Set('je tu vous nous du au sur avec mais où comment suis qué cómo puedes pero también del al muy wie was wer ich wir mir bitte kannst einen einem dem den zu gli sono questo per hoe voor ik jij wat om niet der die das und nicht ist ein eine mit für auf le la les est et une des pour dans que qui pas el los las por con una para es il di che non della och att det är en på jag het een van wij zijn não você uma com também'.split(' '));
const GREETING = /^(hi|hello|hey|hiya|yo|howdy|morning|evening|good (morning|afternoon|evening|night)|thanks|thank you|thx|ty|cheers|bye|goodbye|see you|ok(ay)?|cool|nice|great|awesome|perfect|wow|lol|haha|yes|yep|yeah|no|nope|sure|please|sorry|no worries|sounds good|got it|have a (great|nice|good)|are you there|anyone (there|home)|you there|welcome|congrat\w*|how are you|how's it going|what's up|sup|nice to meet you)\b/i;
const SMALL_TALK = /\b(how are you|how's your day|nice to meet you|have a (nice|good) (day|one)|what's up|good to see you|thank(s| you)( so much| a lot)?)\b/i;

const RULES: Rule[] = [
  { category: 'code', points: 4, what: 'a code block', test: has(/```|^( {4}|\t)\S.*[;{}()]$/m) },
  { category: 'code', points: 2, what: 'programming words', test: has(PROGRAMMING) },
  { category: 'code', points: 2, what: 'a stack trace or error', test: has(STACK_TRACE) },
  { category: 'code', points: 1, what: 'inline code', test: has(/`[^`\n]+`/) },
  { category: 'code', points: 2, what: 'code symbols', test: (t) => (t.match(CODE_SYMBOLS)?.length ?? 0) >= 3 },
  { category: 'reasoning', points: 2, what: 'math or logic words', test: has(MATH_WORDS) },
  { category: 'reasoning', points: 2, what: 'arithmetic or a formula', test: has(ARITHMETIC) },
  { category: 'reasoning', points: 1, what: 'a why or which question', test: has(WHY) },
  { category: 'reasoning', points: 2, what: 'a question about numbers', test: (t) => t.includes('?') && (t.match(/\d+/g)?.length ?? 0) >= 2 },
  { category: 'multilingual', points: 4, what: 'mostly non-Latin script', test: (t) => nonLatinShare(t) > 0.3 },
  { category: 'multilingual', points: 2, what: 'some non-Latin script', test: (t) => nonLatinShare(t) > 0.05 },
  { category: 'multilingual', points: 3, what: 'a translation request', test: (t) => TRANSLATE.test(t) || TRANSLATE_ELSEWHERE.test(t) },
  { category: 'multilingual', points: 2, what: 'words of another language', test: (_t, w) => foreignWords(w) >= 2 },
  { category: 'multilingual', points: 2, what: 'letters of another language', test: has(FOREIGN_LETTERS) },
  { category: 'multilingual', points: 1, what: 'accented letters', test: has(ACCENTS) },
  { category: 'quick-chat', points: 3, what: 'a greeting or thanks', test: (t, w) => w.length <= 8 && (GREETING.test(t.trim()) || SMALL_TALK.test(t)) },
  { category: 'quick-chat', points: 1, what: 'a greeting before the question', test: (t, w) => w.length > 8 && GREETING.test(t.trim()) },
  { category: 'quick-chat', points: 1, what: 'a very short message', test: (_t, w) => w.length <= 6 },
];

export interface RulesAnswer {
  category: TextCategory;
  confidence: number;
  reason: string;
}

export function classifyByRules(text: string): RulesAnswer {
  const words = text.toLowerCase().match(/[\p{L}\p{N}']+/gu) ?? [];
  const points = new Map<TextCategory, number>();
  const why = new Map<TextCategory, string[]>();
  for (const r of RULES) {
    if (!r.test(text, words)) continue;
    points.set(r.category, (points.get(r.category) ?? 0) + r.points);
    why.set(r.category, [...(why.get(r.category) ?? []), r.what]);
  }
  // A very short message with nothing else in it is small talk; beside another category's words it only adds noise.
  if ((points.get('quick-chat') ?? 0) === 1 && points.size > 1) points.delete('quick-chat');
  const ranked = TIE_ORDER.filter((c) => points.has(c)).sort((a, b) => points.get(b)! - points.get(a)!);
  const top = ranked[0];
  const total = [...points.values()].reduce((a, b) => a + b, 0);
  if (!top || points.get(top)! < MIN_POINTS) {
    return { category: 'general', confidence: GENERAL_CONFIDENCE, reason: total ? `too few keywords for any category (${describe(why)})` : 'no category keywords' };
  }
  // The winner's share of every point given, plus one point of doubt.
  const confidence = Math.min(MAX_CONFIDENCE, points.get(top)! / (total + 1));
  return { category: top, confidence: round2(confidence), reason: `keywords: ${describe(new Map([[top, why.get(top)!]]))}` };
}

function describe(why: Map<TextCategory, string[]>): string {
  return [...why].map(([c, w]) => `${w.join(', ')} (${c})`).join('; ');
}

/** Distinct function words of other Latin-script languages among a text's words. */
function foreignWords(words: string[]): number {
  return new Set(words.filter((x) => FOREIGN_WORDS.has(x))).size;
}

/** Letters outside the Latin script, as a share of all letters. */
export function nonLatinShare(text: string): number {
  const letters = text.match(/\p{L}/gu)?.length ?? 0;
  if (letters === 0) return 0;
  const latin = text.match(/\p{Script=Latin}/gu)?.length ?? 0;
  return (letters - latin) / letters;
}
