import { Controller, Delete, Get, Inject, Post, Req, Res } from '@nestjs/common';
import { FastifyReply, FastifyRequest } from 'fastify';
import { requestIdentity } from '../../http/src/identity';
import { clientSignal } from '../../http/src/request-scope.decorator';
import { McpService } from './mcp.service';

/**
 * POST /mcp. The auth layer has admitted the request as any route's (the key; Host and Origin
 * by libs/auth localSurfaceRefusal); the SDK answers it, headers checks and JSON-RPC errors included.
 */
@Controller()
export class McpController {
  constructor(@Inject(McpService) private readonly mcp: McpService) {}

  @Post('mcp')
  async serve(@Req() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    await reply.send(await this.mcp.serve(webRequest(req, clientSignal(reply)), requestIdentity(req), req.body));
  }

  /**
   * This endpoint keeps no sessions and opens no stream of its own: GET (the server-to-client
   * stream) and DELETE (ending a session) get the transport's 405, as the SDK's stateless handler
   * answers, so a client knows it is not offered (a 404 reads as no MCP endpoint at all).
   */
  @Get('mcp')
  async stream(@Res() reply: FastifyReply): Promise<void> {
    await notAllowed(reply);
  }

  @Delete('mcp')
  async endSession(@Res() reply: FastifyReply): Promise<void> {
    await notAllowed(reply);
  }
}

async function notAllowed(reply: FastifyReply): Promise<void> {
  await reply
    .status(405)
    .header('allow', 'POST')
    .send({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null });
}

/**
 * The request as the SDK's fetch-shaped entry takes it: URL, method and headers. The body is
 * handed over already parsed (the service's parser: its size limit and JSON errors), and the
 * signal cancels the call when the client goes away.
 */
function webRequest(req: FastifyRequest, signal: AbortSignal): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  // The SDK reads no host from the URL, and a Host header that is no URL authority ("a b",
  // "a:99999") made it throw (a 500): a fixed origin, with the request's path and query.
  let target: URL;
  try {
    target = new URL(req.url, 'http://localhost');
  } catch {
    target = new URL('/mcp', 'http://localhost');
  }
  return new Request(`http://localhost${target.pathname}${target.search}`, { method: req.method, headers, signal });
}
