import { Inject, Injectable, Logger, Type } from '@nestjs/common';
import { AuthInfo, CallToolResult, createMcpHandler, ListResourcesResult, McpHttpHandler, McpServer, ReadResourceResult, ResourceTemplate, Variables } from '@modelcontextprotocol/server';
import { VERSION } from '../../../apps/server/src/config/server-config';
import { ContextsService } from '../../contexts/src/contexts.service';
import { OpenAIService } from '../../dialects/src/openai/openai.service';
import { ChatCompletionRequestDto } from '../../dialects/src/openai/protocol/chat-completion.dto';
import { CompletionRequestDto } from '../../dialects/src/openai/protocol/completion.dto';
import { EmbeddingRequestDto } from '../../dialects/src/openai/protocol/embedding.dto';
import { RequestScope } from '../../engine/src/core/generation-request';
import { toHttpFailure } from '../../http/src/http-errors';
import { ownerKey, RequestIdentity } from '../../http/src/identity';
import { validationPipe } from '../../http/src/validation';
import { resourceFailure, routeAnswer, routeRefusal } from './answers';
import { routeSchema, ToolName, ToolSpec, TOOLS } from './tools';

/** A context as an MCP resource: svc://contexts/<id>, on the default model (as GET /v1/contexts). */
const CONTEXT_URI = 'svc://contexts/{id}';
const JSON_TYPE = 'application/json';

/**
 * MCP on the official SDK's 2026-07-28 (stateless, per-request) serving entry: every POST
 * /mcp gets a fresh McpServer that knows its caller. Tools call the routes' own service
 * (OpenAIService), resources the contexts service, so both answer as the routes do.
 */
@Injectable()
export class McpService {
  private readonly log = new Logger('mcp');
  /** The routes' DTO validation (the global pipe's rules and wording), for tool arguments. */
  private readonly bodies = validationPipe();
  private readonly handler: McpHttpHandler;

  constructor(
    @Inject(OpenAIService) private readonly openai: OpenAIService,
    @Inject(ContextsService) private readonly contexts: ContextsService,
  ) {
    // legacy 'reject': the spec's protocol is 2026-07-28 only; a 2025-era client (initialize,
    // no MCP-Protocol-Version) gets the SDK's unsupported-protocol-version error.
    this.handler = createMcpHandler(({ authInfo }) => this.serverFor(identityOf(authInfo)), {
      legacy: 'reject',
      // Refusals (missing headers, unknown versions) are the client's to fix: not the server's log.
      onerror: (err) => this.log.debug(err.message),
    });
  }

  /** Serves one POST /mcp whose caller the auth layer admitted; `body` is the parsed JSON. */
  serve(request: Request, who: RequestIdentity, body: unknown): Promise<Response> {
    return this.handler.fetch(request, { parsedBody: body, authInfo: authInfoOf(who) });
  }

  private serverFor(who: RequestIdentity): McpServer {
    // listChanged false: nothing is ever announced, so a subscriptions/listen stream is answered
    // and closed at once instead of held open (it would hold a graceful stop until the forced exit).
    const server = new McpServer({ name: 'svc', version: VERSION }, { capabilities: { tools: { listChanged: false }, resources: { listChanged: false } } });
    for (const tool of TOOLS) {
      server.registerTool(tool.name, { description: tool.description, inputSchema: routeSchema(tool.inputSchema) }, (args, ctx) =>
        this.call(tool, args, { signal: ctx.mcpReq.signal, owner: ownerKey(who) }),
      );
    }
    server.registerResource(
      'context',
      new ResourceTemplate(CONTEXT_URI, { list: () => this.listContexts(who) }),
      { title: 'KV-cache context', description: 'one of your contexts on the default model, as GET /v1/contexts/{id} answers it', mimeType: JSON_TYPE },
      (uri, variables) => this.readContext(who, uri, variables),
    );
    return server;
  }

  private async call(tool: ToolSpec, args: Record<string, unknown>, scope: RequestScope): Promise<CallToolResult> {
    try {
      return routeAnswer(await this.answer(tool.name, tool.body(args), scope));
    } catch (err) {
      const f = toHttpFailure(err);
      // As the error filter logs a route's: a fault of the server, not of the request.
      if (f.status >= 500 && f.status !== 501) this.log.error(`tool ${tool.name}: ${f.message}`, (err as Error)?.stack);
      return routeRefusal(tool.route, f);
    }
  }

  /** What the tool's route answers for `body`, through the route's validation and service. */
  private async answer(name: ToolName, body: Record<string, unknown>, scope: RequestScope): Promise<unknown> {
    switch (name) {
      case 'chat': {
        const { events, renderer } = await this.openai.startChat(await this.dto(ChatCompletionRequestDto, body), scope);
        return renderer.complete(events);
      }
      case 'complete': {
        const { events, renderer } = await this.openai.startCompletion(await this.dto(CompletionRequestDto, body), scope);
        return renderer.complete(events);
      }
      case 'embed':
        return this.openai.embeddings(await this.dto(EmbeddingRequestDto, body), scope.signal);
      case 'list_models':
        return this.openai.models();
    }
  }

  private async dto<T>(metatype: Type<T>, body: Record<string, unknown>): Promise<T> {
    return (await this.bodies.transform(body, { type: 'body', metatype })) as T;
  }

  private async listContexts(who: RequestIdentity): Promise<ListResourcesResult> {
    try {
      const list = await this.contexts.list('', who);
      return { resources: list.map((c) => ({ uri: CONTEXT_URI.replace('{id}', c.id), name: c.id, mimeType: JSON_TYPE })) };
    } catch (err) {
      // No model that holds contexts (an encoder, or none yet): nothing to list, which a host asks at connect.
      const status = toHttpFailure(err).status;
      if (status === 400 || status === 503) return { resources: [] };
      throw resourceFailure('svc://contexts/', err);
    }
  }

  private async readContext(who: RequestIdentity, uri: URL, variables: Variables): Promise<ReadResourceResult> {
    try {
      const { ctx } = await this.contexts.find('', who, String(variables.id));
      return { contents: [{ uri: uri.href, mimeType: JSON_TYPE, text: JSON.stringify(ctx.toJSON()) }] };
    } catch (err) {
      throw resourceFailure(uri.href, err);
    }
  }
}

/**
 * The caller travels to the per-request factory as the SDK's authInfo, the channel it gives
 * per-principal servers. The auth layer already checked the credential; it is not passed on.
 */
function authInfoOf(who: RequestIdentity): AuthInfo {
  return { token: '', clientId: who.owner, scopes: [], extra: { who } };
}

function identityOf(info: AuthInfo | undefined): RequestIdentity {
  const who = info?.extra?.who as RequestIdentity | undefined;
  if (!who) throw new Error('an MCP request reached the server without its caller');
  return who;
}
