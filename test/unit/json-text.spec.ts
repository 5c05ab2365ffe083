import { minifiedJson } from '../../libs/engine/src/text/json-text';

describe('minifiedJson', () => {
  it('drops the whitespace between tokens and keeps every value as written', () => {
    const text = '{\n  "id" : 9888801111935155,\t"x": 1.0, "e": 1e2, "s": "a b\\" c \\\\", "u": "\\u00e9", "a": [ 1 , 2 ] }';
    expect(minifiedJson(text)).toBe('{"id":9888801111935155,"x":1.0,"e":1e2,"s":"a b\\" c \\\\","u":"\\u00e9","a":[1,2]}');
    // It was JSON.stringify(JSON.parse(...)): the integer came back rounded.
    expect(JSON.stringify(JSON.parse(text))).toContain('9888801111935156');
  });

  it('leaves compact JSON as it is', () => {
    for (const t of ['{}', '[]', '"x"', '12', '{"a":{"b":[true,false,null]}}']) expect(minifiedJson(t)).toBe(t);
  });
});
