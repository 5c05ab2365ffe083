import { CallToolResult, ProtocolError, ProtocolErrorCode, ResourceNotFoundError } from '@modelcontextprotocol/server';
import { errorBody, HttpFailure, toHttpFailure } from '../../http/src/http-errors';

/** A tool's answer: the route's JSON as one text item (spec: "the matching route's JSON as text"). */
export function routeAnswer(json: unknown): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(json) }] };
}

/**
 * A tool call the route would refuse: a tool error (isError) holding the route's error body,
 * so a client reads the same status text and message the HTTP route answers.
 */
export function routeRefusal(route: string, f: HttpFailure): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(errorBody(route, f.status, f.message)) }], isError: true };
}

/**
 * A resource read or list the contexts routes would refuse, as the JSON-RPC error the SDK sends:
 * their 404 (missing, or another caller's: it does not exist for you) is MCP's resource-not-found.
 */
export function resourceFailure(uri: string, err: unknown): ProtocolError {
  const f = toHttpFailure(err);
  if (f.status === 404) return new ResourceNotFoundError(uri, f.message);
  const code = f.status < 500 && f.status !== 429 ? ProtocolErrorCode.InvalidParams : ProtocolErrorCode.InternalError;
  return new ProtocolError(code, f.message, { status: f.status });
}
