import { InvalidRequestError } from '../../engine/src/core/errors';

export type QuestionType = 'choice' | 'noul' | 'score';

/** One option as the model sees it: its letter, and the text shown after it. */
export interface LetteredOption {
  letter: string;
  /** What the answer calls it: a choice's key, a score's position, `true`/`false` for noul. */
  key: string;
  text: string;
}

export interface Question {
  name: string;
  type: QuestionType;
  /** The instructions as shown: a string as it is, an object or array as JSON. */
  instructions: string;
  options: LetteredOption[];
}

export const MAX_QUESTIONS = 64;
const MAX_OPTIONS = 26;
const TYPES: QuestionType[] = ['choice', 'noul', 'score'];

/** The request's state, checked: a string, object or array with something in it. */
export function checkState(state: unknown): string | object {
  if (state === undefined || state === null) throw new InvalidRequestError('state is required');
  if (typeof state !== 'string' && typeof state !== 'object') throw new InvalidRequestError('state must be a string, an object or an array');
  const empty = typeof state === 'string' ? state.trim() === '' : Array.isArray(state) ? state.length === 0 : Object.keys(state).length === 0;
  if (empty) throw new InvalidRequestError('state is empty: the questions need something to be about');
  return state;
}

/** The keys of the body's object at a path, in the order written (see libs/http json-key-order). */
export type KeyOrder = (path: string[]) => string[] | undefined;

/**
 * The named questions, in the order sent, each with its options lettered A, B, C... in the order
 * sent. `order` reads the body's own key order, where JavaScript's (integer keys first, ascending:
 * {"5": …, "1": …} lists "1" first) differs from it.
 */
export function parseQuestions(v: unknown, order?: KeyOrder): Question[] {
  if (v === undefined || v === null) throw new InvalidRequestError('questions is required');
  if (typeof v !== 'object' || Array.isArray(v)) throw new InvalidRequestError('questions must be an object of named questions');
  const q = v as Record<string, unknown>;
  const entries = inOrder(q, order?.(['questions'])).map((n) => [n, q[n]] as const);
  if (entries.length === 0) throw new InvalidRequestError(`questions is empty: ask 1 to ${MAX_QUESTIONS} questions`);
  if (entries.length > MAX_QUESTIONS) throw new InvalidRequestError(`questions holds ${entries.length}; at most ${MAX_QUESTIONS} may be asked at once`);
  return entries.map(([name, q]) => parseQuestion(name, q, order?.(['questions', name, 'criteria'])));
}

/** An object's keys in the order sent when that order is known and matches them, else JavaScript's. */
function inOrder(o: Record<string, unknown>, sent: string[] | undefined): string[] {
  const keys = Object.keys(o);
  return sent && sent.length === keys.length && sent.every((k) => Object.prototype.hasOwnProperty.call(o, k)) ? sent : keys;
}

function parseQuestion(name: string, q: unknown, criteriaOrder?: string[]): Question {
  const where = `question ${JSON.stringify(name)}`;
  if (!q || typeof q !== 'object' || Array.isArray(q)) throw new InvalidRequestError(`${where} must be an object with type, instructions and criteria`);
  const { type, instructions, criteria } = q as Record<string, unknown>;
  if (typeof type !== 'string' || !TYPES.includes(type as QuestionType)) throw new InvalidRequestError(`${where}: type must be one of ${TYPES.join(', ')}`);
  return { name, type: type as QuestionType, instructions: instructionsText(where, instructions), options: lettered(optionsOf(where, type as QuestionType, criteria, criteriaOrder)) };
}

function instructionsText(where: string, v: unknown): string {
  if (v === undefined || v === null) throw new InvalidRequestError(`${where}: instructions is required`);
  if (typeof v === 'string') {
    if (v.trim() === '') throw new InvalidRequestError(`${where}: instructions is empty`);
    return v;
  }
  if (typeof v === 'object') {
    if (Array.isArray(v) ? v.length === 0 : Object.keys(v).length === 0) throw new InvalidRequestError(`${where}: instructions is empty`);
    return JSON.stringify(v, null, 2);
  }
  throw new InvalidRequestError(`${where}: instructions must be a string, an object or an array`);
}

/** [key, text] per option, in the order the letters go. */
function optionsOf(where: string, type: QuestionType, criteria: unknown, order?: string[]): Array<[string, string]> {
  if (type === 'noul') return yesNo(where, criteria);
  if (type === 'score') {
    if (!Array.isArray(criteria)) throw new InvalidRequestError(`${where}: a score's criteria must be an array of descriptions, lowest first`);
    countOptions(where, criteria.length);
    return criteria.map((d, i) => {
      if (typeof d !== 'string' || d.trim() === '') throw new InvalidRequestError(`${where}: criteria[${i}] must be a description (a non-empty string)`);
      return [String(i), d];
    });
  }
  if (!criteria || typeof criteria !== 'object' || Array.isArray(criteria)) {
    throw new InvalidRequestError(`${where}: a choice's criteria must be an object mapping each option to a description (or null)`);
  }
  const c = criteria as Record<string, unknown>;
  const entries = inOrder(c, order).map((k) => [k, c[k]] as const);
  countOptions(where, entries.length);
  return entries.map(([key, d]) => {
    if (key.trim() === '') throw new InvalidRequestError(`${where}: an option's name is empty`);
    if (d !== null && typeof d !== 'string') throw new InvalidRequestError(`${where}: the description of option ${JSON.stringify(key)} must be a string or null`);
    return [key, d === null || d.trim() === '' ? key : `${key}: ${d}`];
  });
}

/** A yes/no question: A is yes (true), B is no (false), each with its description when given. */
function yesNo(where: string, criteria: unknown): Array<[string, string]> {
  let described: Record<string, unknown> = {};
  if (criteria !== undefined && criteria !== null) {
    if (typeof criteria !== 'object' || Array.isArray(criteria)) throw new InvalidRequestError(`${where}: a noul's criteria must be an object with keys false and true`);
    described = criteria as Record<string, unknown>;
    const other = Object.keys(described).find((k) => k !== 'true' && k !== 'false');
    if (other !== undefined) throw new InvalidRequestError(`${where}: a noul's criteria has only the keys false and true, not ${JSON.stringify(other)}`);
    for (const k of ['true', 'false']) {
      const d = described[k];
      if (d !== undefined && d !== null && typeof d !== 'string') throw new InvalidRequestError(`${where}: criteria.${k} must be a string`);
    }
  }
  const text = (answer: string, k: string) => (typeof described[k] === 'string' && (described[k] as string).trim() !== '' ? `${answer}: ${described[k]}` : answer);
  return [
    ['true', text('Yes', 'true')],
    ['false', text('No', 'false')],
  ];
}

function countOptions(where: string, n: number): void {
  if (n < 2 || n > MAX_OPTIONS) throw new InvalidRequestError(`${where}: criteria must name 2 to ${MAX_OPTIONS} options, not ${n}`);
}

function lettered(options: Array<[string, string]>): LetteredOption[] {
  return options.map(([key, text], i) => ({ letter: String.fromCharCode(65 + i), key, text }));
}
