import { InvalidRequestError } from '../../libs/engine/src/core/errors';
import { inlineLocalRefs } from '../../libs/engine/src/prompt/schema-refs';

describe('inlineLocalRefs (tool parameters for llama.cpp call grammars)', () => {
  it('returns a schema without $ref as it is', () => {
    const s = { type: 'object', properties: { a: { type: 'string' } } };
    expect(inlineLocalRefs(s, 't')).toBe(s);
  });

  it('inlines $defs and definitions, keeps keywords beside a $ref, drops the definitions', () => {
    const s = {
      $defs: { A: { type: 'object', properties: { b: { $ref: '#/definitions/B' } } } },
      definitions: { B: { type: 'integer', minimum: 1 } },
      type: 'object',
      properties: { a: { $ref: '#/$defs/A', description: 'the a' }, list: { type: 'array', items: { $ref: '#/definitions/B' } } },
    };
    expect(inlineLocalRefs(s, 't')).toEqual({
      type: 'object',
      properties: {
        a: { type: 'object', properties: { b: { type: 'integer', minimum: 1 } }, description: 'the a' },
        list: { type: 'array', items: { type: 'integer', minimum: 1 } },
      },
    });
  });

  it('follows JSON pointer escapes and percent-encoding, and boolean schemas', () => {
    const s = { $defs: { 'a/b': { type: 'string' }, 'c~d': { type: 'number' }, 'e f': true, no: false }, type: 'object', properties: {
      x: { $ref: '#/$defs/a~1b' }, y: { $ref: '#/$defs/c~0d' }, z: { $ref: '#/$defs/e%20f' }, n: { $ref: '#/$defs/no' } } };
    expect(inlineLocalRefs(s, 't')).toEqual({ type: 'object', properties: { x: { type: 'string' }, y: { type: 'number' }, z: {}, n: { not: {} } } });
  });

  it('inlines a $ref at the root', () => {
    expect(inlineLocalRefs({ $defs: { A: { type: 'object', properties: { b: { type: 'string' } } } }, $ref: '#/$defs/A', title: 'Root' }, 't'))
      .toEqual({ type: 'object', properties: { b: { type: 'string' } }, title: 'Root' });
  });

  it('uses the same definition twice without calling it recursive', () => {
    const s = { $defs: { P: { type: 'string' } }, type: 'object', properties: { a: { $ref: '#/$defs/P' }, b: { $ref: '#/$defs/P' } } };
    expect(inlineLocalRefs(s, 't')).toEqual({ type: 'object', properties: { a: { type: 'string' }, b: { type: 'string' } } });
  });

  it('refuses recursion, dangling and malformed pointers, and blow-ups, naming the tool', () => {
    const fail = (s: Record<string, unknown>) => {
      try {
        inlineLocalRefs(s, 'tool "f" parameters');
      } catch (e) {
        expect(e).toBeInstanceOf(InvalidRequestError);
        return (e as Error).message;
      }
      throw new Error('no error');
    };
    expect(fail({ $defs: { N: { type: 'object', properties: { k: { $ref: '#/$defs/N' } } } }, $ref: '#/$defs/N' }))
      .toBe('tool "f" parameters: the $ref #/$defs/N refers to itself (a recursive schema), which a tool\'s parameters cannot use here');
    expect(fail({ type: 'object', properties: { a: { $ref: '#' } } })).toMatch(/the \$ref # refers to itself/);
    expect(fail({ properties: { a: { $ref: '#/$defs/Gone' } } })).toBe('tool "f" parameters: the $ref #/$defs/Gone points at nothing in the schema');
    expect(fail({ $defs: { A: 3 }, properties: { a: { $ref: '#/$defs/A' } } })).toBe('tool "f" parameters: the $ref #/$defs/A does not point at a schema');
    expect(fail({ properties: { a: { $ref: '#/%E0%A4%A' } } })).toBe('tool "f" parameters: the $ref #/%E0%A4%A is not a valid JSON pointer');
    // Each level uses the one below twice: 2^20 copies once inlined.
    const defs: Record<string, unknown> = { L0: { type: 'string' } };
    for (let i = 1; i <= 20; i++) defs[`L${i}`] = { type: 'array', prefixItems: [{ $ref: `#/$defs/L${i - 1}` }, { $ref: `#/$defs/L${i - 1}` }] };
    expect(fail({ $defs: defs, $ref: '#/$defs/L20' })).toMatch(/too large once its \$refs are inlined \(over 20000 nodes\)/);
  });

  it('leaves a remote $ref to llama.cpp', () => {
    const s = { $defs: { A: { type: 'string' } }, properties: { a: { $ref: 'https://example.com/s.json' }, b: { $ref: '#/$defs/A' } } };
    expect(inlineLocalRefs(s, 't')).toEqual({ properties: { a: { $ref: 'https://example.com/s.json' }, b: { type: 'string' } } });
  });
});
