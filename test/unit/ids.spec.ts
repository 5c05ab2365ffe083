import { newId } from '../../libs/dialects/src/shared/collect';

describe('newId', () => {
  it('gives distinct 24-character base64url ids after the prefix, across pool refills', () => {
    const ids = Array.from({ length: 1000 }, () => newId('chatcmpl-'));
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^chatcmpl-[A-Za-z0-9_-]{24}$/);
  });
});
