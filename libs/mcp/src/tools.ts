import type { StandardSchemaWithJSON } from '@modelcontextprotocol/server';
import { InvalidRequestError } from '../../engine/src/core/errors';

/**
 * The MCP tools (spec "POST /mcp"): each is one HTTP route, called with the body its arguments
 * make and answering that route's JSON. Pure: the service (mcp.service.ts) runs them.
 */

export type ToolName = 'chat' | 'complete' | 'embed' | 'list_models';

export interface ToolSpec {
  name: ToolName;
  description: string;
  /** The route the tool answers as: its JSON, and its error shape for that path. */
  route: string;
  /** What tools/list advertises (JSON Schema). */
  inputSchema: Record<string, unknown>;
  /** The route's request body for the tool's arguments. */
  body(args: Record<string, unknown>): Record<string, unknown>;
}

const MODEL = { type: 'string', description: 'a model name from list_models; "" or absent for the server\'s default model' };
const MAX_TOKENS = { type: 'integer', minimum: 0, description: 'the most tokens to generate (default 512)' };
const TEMPERATURE = { type: 'number', description: 'sampling temperature; 0 is greedy' };
const JSON_SCHEMA = { type: 'object', description: 'a JSON Schema the answer follows, enforced while sampling' };

export const TOOLS: readonly ToolSpec[] = [
  {
    name: 'chat',
    description: 'Chat with a local model. Answers the JSON of POST /v1/chat/completions (the reply is choices[0].message.content).',
    route: '/v1/chat/completions',
    inputSchema: {
      type: 'object',
      properties: {
        messages: {
          type: 'array',
          description: 'the conversation: {role, content} objects (roles system, user, assistant, tool, or any plain name)',
          items: { type: 'object', properties: { role: { type: 'string' }, content: { type: ['string', 'array', 'null'] } }, required: ['role'] },
        },
        model: MODEL,
        max_tokens: MAX_TOKENS,
        temperature: TEMPERATURE,
        json_schema: JSON_SCHEMA,
      },
      required: ['messages'],
    },
    body: (a) => present({ messages: a.messages, ...generationFields(a) }),
  },
  {
    name: 'complete',
    description: 'Continue a text with a local model (no chat template). Answers the JSON of POST /v1/completions (the text is choices[0].text).',
    route: '/v1/completions',
    inputSchema: {
      type: 'object',
      properties: { prompt: { type: 'string', description: 'the text to continue' }, model: MODEL, max_tokens: MAX_TOKENS, temperature: TEMPERATURE, json_schema: JSON_SCHEMA },
      required: ['prompt'],
    },
    body: (a) => present({ prompt: a.prompt, ...generationFields(a) }),
  },
  {
    name: 'embed',
    description: 'Unit-length embedding vectors of texts, from the server\'s encoder (-embed). Answers the JSON of POST /v1/embeddings.',
    route: '/v1/embeddings',
    inputSchema: {
      type: 'object',
      properties: {
        input: { description: 'a string, or an array of at most 2048 non-empty strings', anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] },
        model: { type: 'string', description: 'an encoder\'s name from list_models; "" or absent for the server\'s encoder' },
      },
      required: ['input'],
    },
    body: (a) => present({ input: a.input, model: a.model }),
  },
  {
    name: 'list_models',
    description: 'The models this server can run, with their capabilities. Answers the JSON of GET /v1/models.',
    route: '/v1/models',
    inputSchema: { type: 'object', properties: {} },
    body: () => ({}),
  },
];

/** model, max_tokens, temperature as the routes take them; json_schema as their response_format. */
function generationFields(a: Record<string, unknown>): Record<string, unknown> {
  const schema = a.json_schema;
  // null is absent, as in every optional field of the routes.
  if (schema !== undefined && schema !== null && (typeof schema !== 'object' || Array.isArray(schema))) {
    throw new InvalidRequestError('cannot parse request: json_schema must be a JSON Schema object');
  }
  return { model: a.model, max_tokens: a.max_tokens, temperature: a.temperature, response_format: schema ? { type: 'json_schema', json_schema: { schema } } : undefined };
}

/** The fields that were sent (a body without the absent ones, as a client would send it). */
function present(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
}

/**
 * A tool's input schema for the SDK: advertised as given, and every argument object let through,
 * so the route's own validation (its DTO, the same messages) decides what is refused and the
 * refusal is the route's error JSON rather than a second, differently worded check.
 */
export function routeSchema(json: Record<string, unknown>): StandardSchemaWithJSON<Record<string, unknown>> {
  return {
    '~standard': {
      version: 1,
      vendor: 'svc',
      validate: (value) => ({ value: value as Record<string, unknown> }),
      jsonSchema: { input: () => json, output: () => json },
    },
  };
}
