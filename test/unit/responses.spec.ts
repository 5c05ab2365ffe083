import { KeyedLock } from '../../libs/dialects/src/responses/keyed-lock';
import { inputToCore } from '../../libs/dialects/src/responses/mapping/input-items.mapper';
import { responsesRequestToCore } from '../../libs/dialects/src/responses/mapping/responses-request.mapper';
import { ResponsesRequestDto } from '../../libs/dialects/src/responses/protocol/responses.dto';
import { WireResponse } from '../../libs/dialects/src/responses/protocol/wire-types';
import { ResponseStore, STORED_RESPONSES_CAP, StoredResponse } from '../../libs/dialects/src/responses/response-store';

const rec = (id: string, owner = ''): StoredResponse => ({ response: { id } as WireResponse, owner, conversation: [], inputItems: [], context: { weights: 'm', id: `ctx_${id}` } });

describe('ResponseStore', () => {
  it('keeps the last 256 by default and hands back the evicted, oldest first', () => {
    const s = new ResponseStore();
    expect(STORED_RESPONSES_CAP).toBe(256);
    const evicted: string[] = [];
    for (let i = 0; i < 260; i++) evicted.push(...s.put(rec(`r${i}`)).map((r) => r.response.id));
    expect(evicted).toEqual(['r0', 'r1', 'r2', 'r3']);
    expect(s.size).toBe(256);
    expect(s.get('r3', '')).toBeUndefined();
    expect(s.get('r4', '')?.context).toEqual({ weights: 'm', id: 'ctx_r4' });
  });

  it('hides another owner\'s record and removes only one\'s own', () => {
    const s = new ResponseStore(2);
    s.put(rec('a', 'alice'));
    expect(s.get('a', 'bob')).toBeUndefined();
    expect(s.remove('a', 'bob')).toBeUndefined();
    expect(s.remove('a', 'alice')?.response.id).toBe('a');
    expect(s.get('a', 'alice')).toBeUndefined();
  });
});

describe('KeyedLock', () => {
  it('runs tasks of one key in order, other keys alongside, and survives a failure', async () => {
    const lock = new KeyedLock();
    const log: string[] = [];
    const task = (name: string, ms: number, fail = false) => async () => {
      log.push(`${name}+`);
      await new Promise((r) => setTimeout(r, ms));
      log.push(`${name}-`);
      if (fail) throw new Error(name);
    };
    await Promise.allSettled([lock.run('k', task('a', 20, true)), lock.run('k', task('b', 1)), lock.run('j', task('c', 1))]);
    expect(log.indexOf('a-')).toBeLessThan(log.indexOf('b+'));
    expect(log.indexOf('c-')).toBeLessThan(log.indexOf('a-'));
  });
});

describe('responses input mapping', () => {
  it('reads function_call items as the assistant turn\'s tool calls and outputs as tool messages', () => {
    expect(
      inputToCore([
        { role: 'developer', content: 'Be brief' },
        { role: 'user', content: [{ type: 'input_text', text: 'Weather' }, { type: 'input_text', text: 'in Paris?' }] },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Let me check.' }] },
        { type: 'function_call', call_id: 'c1', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call', call_id: 'c2', name: 'get_weather', arguments: '{"city":"Rome"}' },
        { type: 'function_call_output', call_id: 'c1', output: 'sunny' },
        { type: 'reasoning', summary: [] },
      ]),
    ).toEqual([
      { role: 'system', content: 'Be brief' },
      { role: 'user', content: 'Weather\nin Paris?' },
      {
        role: 'assistant',
        content: 'Let me check.',
        tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'c2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
    ]);
  });

  it('one answer\'s items (thoughts, text, calls, thoughts after text) are one assistant turn, as a previous_response_id chain carries them', () => {
    const think = (text: string) => ({ type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text }] });
    const say = (text: string) => ({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] });
    expect(
      inputToCore([{ role: 'user', content: 'hi' }, think('a '), say('Let me check. '), think('b'), say('Done.'), { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' }, { type: 'function_call_output', call_id: 'c1', output: 'ok' }, think('c')]),
    ).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'Let me check. Done.', reasoning_content: 'a b', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'ok' },
      { role: 'assistant', content: '', reasoning_content: 'c' },
    ]);
  });

  it('puts this turn\'s instructions ahead of the carried conversation and forks the earlier context', () => {
    const d = Object.assign(new ResponsesRequestDto(), { input: 'Next', instructions: 'Be brief', tools: [{ type: 'function', name: 'f' }, { type: 'function', name: 'g' }], tool_choice: { type: 'function', name: 'g' } });
    const prior = { conversation: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello' }], context: { weights: 'm', id: 'ctx_1' } };
    const { request, input } = responsesRequestToCore(d, prior, 'alice');
    expect(input).toEqual([{ role: 'user', content: 'Next' }]);
    expect(request.prompt).toMatchObject({
      kind: 'chat',
      messages: [{ role: 'system', content: 'Be brief' }, ...prior.conversation, { role: 'user', content: 'Next' }],
      tools: [{ type: 'function', function: { name: 'g' } }],
      toolChoice: { name: 'g' },
    });
    expect(request.maxTokens).toBe(1024);
    expect(request.keepContext).toEqual({ from: prior.context });
    expect(request.owner).toBe('alice');
  });
});
