import { schemaProblem } from '../../libs/engine/src/constraints/schema-check';

describe('schemaProblem', () => {
  it('passes schemas some value satisfies', () => {
    for (const s of [
      { type: 'string', minLength: 2, maxLength: 2 },
      { type: 'array', minItems: 0, maxItems: 3, items: { type: 'integer', minimum: -1, maximum: 1 } },
      { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 1 },
      { type: 'object', properties: { a: { enum: ['x'] } }, $defs: { b: { type: 'string' } } },
      { anyOf: [{ type: 'null' }, { type: 'string', maxLength: 0 }] },
      true,
      {},
    ]) {
      expect(schemaProblem(s)).toBeUndefined();
    }
  });

  it('names the first range no value satisfies, with its path', () => {
    expect(schemaProblem({ type: 'string', minLength: 5, maxLength: 2 })).toBe('minLength 5 is above maxLength 2, which no value satisfies');
    expect(schemaProblem({ properties: { a: { items: { minItems: 2, maxItems: 1 } } } })).toBe('properties.a.items: minItems 2 is above maxItems 1, which no value satisfies');
    expect(schemaProblem({ anyOf: [{}, { minimum: 3, maximum: 1 }] })).toBe('anyOf[1]: minimum 3 is above maximum 1, which no value satisfies');
    expect(schemaProblem({ prefixItems: [{ minProperties: 2, maxProperties: 0 }] })).toBe('prefixItems[0]: minProperties 2 is above maxProperties 0, which no value satisfies');
    expect(schemaProblem({ exclusiveMinimum: 1, exclusiveMaximum: 1 })).toBe('exclusiveMinimum 1 is not below exclusiveMaximum 1, which no value satisfies');
    expect(schemaProblem({ $defs: { d: { enum: [] } } })).toBe('$defs.d: enum lists no value, which no value satisfies');
  });

  it('refuses "not", which llama.cpp\'s grammar ignores', () => {
    expect(schemaProblem({ additionalProperties: { not: {} } })).toBe('additionalProperties: the keyword "not" is not supported: a grammar cannot exclude what a schema matches');
  });

  it('stops at a depth llama.cpp would not reach either', () => {
    let deep: Record<string, unknown> = { minLength: 2, maxLength: 1 };
    for (let i = 0; i < 100; i++) deep = { items: deep };
    expect(schemaProblem(deep)).toBeUndefined();
  });
});
