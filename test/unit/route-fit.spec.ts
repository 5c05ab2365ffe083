import { InvalidRequestError } from '../../libs/engine/src/core/errors';
import { ANSWER_ROOM, estimateTokens, fitsContext } from '../../libs/route/src/rank/fit';
import { RouteRequestDto } from '../../libs/route/src/protocol/route.dto';
import { routeInput } from '../../libs/route/src/route-input';

describe('route: fit arithmetic', () => {
  it('estimates a quarter token a character, four a message, 576 a picture', () => {
    expect(estimateTokens({ chars: 0, messages: 1, pictures: 0 })).toBe(4);
    expect(estimateTokens({ chars: 4000, messages: 1, pictures: 0 })).toBe(1004);
    expect(estimateTokens({ chars: 4001, messages: 3, pictures: 2 })).toBe(1001 + 12 + 1152);
  });

  it('fits when the conversation plus the 512-token answer is within the context, bounds included', () => {
    expect(ANSWER_ROOM).toBe(512);
    expect(fitsContext(4096 - 512, 4096)).toBe(true);
    expect(fitsContext(4096 - 511, 4096)).toBe(false);
  });
});

describe('route: reading the request', () => {
  const read = (body: Partial<RouteRequestDto>) => routeInput(body as RouteRequestDto);
  const refused = async (body: Partial<RouteRequestDto>) => {
    try {
      await read(body);
    } catch (e) {
      expect(e).toBeInstanceOf(InvalidRequestError);
      return (e as Error).message;
    }
    throw new Error('not refused');
  };

  it('text: one message; pictures from images or has_image', async () => {
    expect(await read({ text: 'hi' })).toEqual({ text: 'hi', chars: 2, messages: 1, pictures: 0 });
    expect((await read({ text: 'hi', images: 3 })).pictures).toBe(3);
    expect((await read({ text: 'hi', has_image: true })).pictures).toBe(1);
    expect((await read({ text: 'hi', has_image: false, images: 0 })).pictures).toBe(0);
  });

  it('messages: the last user text is classified, every text counts for length, picture parts count', async () => {
    const r = await read({
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'What is in' }, { type: 'text', text: 'this photo?' }, { type: 'image_url', image_url: { url: 'https://x/y.png' } }] },
        { role: 'assistant', content: null },
        { role: 'user', content: 'And this one?', images: ['aGk='] },
      ],
    });
    expect(r).toEqual({ text: 'And this one?', chars: 9 + 'What is in\nthis photo?'.length + 13, messages: 4, pictures: 2 });
    expect((await read({ messages: [{ role: 'user', content: 'Q' }, { role: 'assistant', content: 'A' }] })).text).toBe('Q');
    expect((await read({ messages: [{ role: 'system', content: 'only a system text' }] })).text).toBe('only a system text');
    expect(await read({ messages: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] })).toEqual({ text: '', chars: 0, messages: 1, pictures: 1 });
  });

  it('refuses neither, both, empty text, empty messages, bad roles and unreadable content', async () => {
    expect(await refused({})).toBe('send text or messages');
    expect(await refused({ text: 'a', messages: [{ role: 'user', content: 'b' }] })).toBe('send text or messages, not both');
    expect(await refused({ text: '' })).toBe('text is empty');
    expect(await refused({ text: '  \n' })).toBe('text is empty');
    expect(await refused({ messages: [] })).toBe('messages is empty');
    expect(await refused({ messages: [{ content: 'x' }] })).toMatch(/^messages\[0\]\.role is not a role name/);
    expect(await refused({ messages: [{ role: 'user', content: 5 }] as never })).toBe('messages[0].content must be a string or an array of content parts');
    expect(await refused({ messages: [{ role: 'user', content: ['x'] }] })).toBe('messages[0].content[0] must be an object with a type');
    expect(await refused({ messages: [{ role: 'user', content: 'x', images: 'y' }] })).toBe('messages[0].images must be an array');
    expect(await refused({ messages: [{ role: 'user', content: '' }] })).toBe('messages hold no text');
  });
});

describe('route input length', () => {
  it('counts characters as code points: 3001 emoji are 3001 characters, not 6002', async () => {
    const emoji = '😀'.repeat(3001);
    expect((await routeInput({ text: emoji } as never)).chars).toBe(3001);
    expect((await routeInput({ messages: [{ role: 'user', content: emoji }, { role: 'user', content: 'ab' }] } as never)).chars).toBe(3003);
  });
});
