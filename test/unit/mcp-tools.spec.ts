import { ProtocolError, ProtocolErrorCode, ResourceNotFoundError } from '@modelcontextprotocol/server';
import { ContextNotFoundError } from '../../libs/engine/src/contexts/context-errors';
import { EngineError, InvalidRequestError, NoModelError } from '../../libs/engine/src/core/errors';
import { resourceFailure, routeAnswer, routeRefusal } from '../../libs/mcp/src/answers';
import { routeSchema, TOOLS } from '../../libs/mcp/src/tools';

const tool = (name: string) => TOOLS.find((t) => t.name === name)!;

describe('MCP tools: arguments → the route body', () => {
  it('each tool names its route, and the four are the spec\'s', () => {
    expect(TOOLS.map((t) => [t.name, t.route])).toEqual([
      ['chat', '/v1/chat/completions'],
      ['complete', '/v1/completions'],
      ['embed', '/v1/embeddings'],
      ['list_models', '/v1/models'],
    ]);
  });

  it('chat: messages, model, max_tokens, temperature as sent; json_schema becomes response_format json_schema', () => {
    const messages = [{ role: 'user', content: 'hi' }];
    const schema = { type: 'object', properties: { n: { type: 'integer' } } };
    expect(tool('chat').body({ messages, model: 'm', max_tokens: 5, temperature: 0, json_schema: schema })).toEqual({
      messages,
      model: 'm',
      max_tokens: 5,
      temperature: 0,
      response_format: { type: 'json_schema', json_schema: { schema } },
    });
  });

  it('leaves absent arguments out (null json_schema is absent) and drops arguments the tool does not take', () => {
    expect(tool('chat').body({ messages: [], json_schema: null, stream: true, logprobs: true })).toEqual({ messages: [] });
    expect(tool('complete').body({ prompt: 'Once', echo: true })).toEqual({ prompt: 'Once' });
    expect(tool('embed').body({ input: ['a', 'b'], encoding_format: 'base64' })).toEqual({ input: ['a', 'b'] });
    expect(tool('list_models').body({ anything: 1 })).toEqual({});
  });

  it('passes wrong types on for the route to refuse, except a json_schema that is not an object', () => {
    expect(tool('chat').body({ messages: 'hi', max_tokens: 'ten' })).toEqual({ messages: 'hi', max_tokens: 'ten' });
    for (const bad of ['{}', 3, [{}]]) {
      expect(() => tool('complete').body({ prompt: 'x', json_schema: bad })).toThrow(new InvalidRequestError('cannot parse request: json_schema must be a JSON Schema object'));
    }
  });

  it('the SDK schema advertises the JSON Schema and lets every argument object through to the route', () => {
    const s = routeSchema(tool('chat').inputSchema)['~standard'];
    expect(s.jsonSchema.input({ target: 'draft-2020-12' })).toBe(tool('chat').inputSchema);
    const args = { messages: 'not an array', extra: 1 };
    expect(s.validate(args)).toEqual({ value: args });
  });
});

describe('MCP answers', () => {
  it("a tool's answer is the route's JSON as one text item", () => {
    const json = { object: 'list', data: [{ id: 'm' }] };
    expect(routeAnswer(json)).toEqual({ content: [{ type: 'text', text: JSON.stringify(json) }] });
  });

  it("a refusal is a tool error holding the route's error body", () => {
    expect(routeRefusal('/v1/embeddings', { status: 400, message: 'input is required' })).toEqual({
      content: [{ type: 'text', text: '{"error":{"message":"input is required","type":"Bad Request"}}' }],
      isError: true,
    });
  });

  it("a context the routes answer 404 for is MCP's resource-not-found; other refusals keep their message", () => {
    const missing = resourceFailure('svc://contexts/ctx_3', new ContextNotFoundError('ctx_3'));
    expect(missing).toBeInstanceOf(ResourceNotFoundError);
    expect([missing.code, missing.message]).toEqual([ProtocolErrorCode.InvalidParams, 'no such context on this model: ctx_3']);
    const bad = resourceFailure('svc://contexts/', new InvalidRequestError('x is an encoder'));
    expect([bad instanceof ProtocolError, bad.code, bad.message, bad.data]).toEqual([true, ProtocolErrorCode.InvalidParams, 'x is an encoder', { status: 400 }]);
    expect(resourceFailure('svc://contexts/', new NoModelError()).code).toBe(ProtocolErrorCode.InternalError);
    expect(resourceFailure('svc://contexts/', new EngineError('busy', 429)).code).toBe(ProtocolErrorCode.InternalError);
  });
});
