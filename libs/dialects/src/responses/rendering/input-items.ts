import { InvalidRequestError } from '../../../../engine/src/core/errors';
import { newId } from '../../shared/collect';
import { ResponsesInputItem } from '../protocol/responses.dto';

/** An input item as GET /v1/responses/{id}/input_items lists it: the item as sent, with an id and a status. */
export type WireInputItem = Record<string, unknown> & { id: string; type: string };

export interface InputItemsPage {
  object: 'list';
  data: WireInputItem[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

/**
 * A request's `input` (already checked by inputToCore) as listed items: a string is one user
 * message; message content given as a string becomes one text part, as the official API lists it.
 */
export function wireInputItems(input: string | ResponsesInputItem[]): WireInputItem[] {
  const items = typeof input === 'string' ? [{ type: 'message', role: 'user', content: input } as ResponsesInputItem] : input;
  return items.map((item) => {
    const type = typeof item.type === 'string' ? item.type : 'message';
    const id = typeof item.id === 'string' ? item.id : newId(ID_PREFIX[type] ?? 'item_');
    const listed: WireInputItem = { ...item, id, type };
    if (type === 'message' && typeof item.content === 'string') {
      listed.content = [{ type: item.role === 'assistant' ? 'output_text' : 'input_text', text: item.content }];
    }
    if (type !== 'reasoning') listed.status ??= 'completed';
    return listed;
  });
}

const ID_PREFIX: Record<string, string> = { message: 'msg_', function_call: 'fc_', function_call_output: 'fco_', reasoning: 'rs_' };

export interface PageQuery {
  order?: string;
  limit?: string;
  after?: string;
  before?: string;
}

/** One page of items, cursor-paged as the official API: newest first unless order=asc, 20 by default, at most 100. */
export function pageOf(all: WireInputItem[], q: PageQuery): InputItemsPage {
  const order = q.order ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw new InvalidRequestError(`order must be asc or desc, got "${order}"`);
  const limit = q.limit === undefined ? 20 : Number(q.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new InvalidRequestError(`limit must be an integer from 1 to 100, got "${q.limit}"`);
  let items = order === 'asc' ? all : [...all].reverse();
  const at = (cursor: string, field: string) => {
    const i = items.findIndex((x) => x.id === cursor);
    if (i < 0) throw new InvalidRequestError(`${field} names no input item of this response: "${cursor}"`);
    return i;
  };
  if (q.after !== undefined) items = items.slice(at(q.after, 'after') + 1);
  if (q.before !== undefined) items = items.slice(0, at(q.before, 'before'));
  const data = items.slice(0, limit);
  return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null, has_more: items.length > limit };
}
