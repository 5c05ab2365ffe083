import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';

/** Each open connection and the request it carries now (null: none yet, or only part of its headers). */
const tracked = new WeakMap<Server, Map<Socket, IncomingMessage | null>>();

/** Follows the server's connections from now on, for dropUnstartedRequests at shutdown. */
export function trackConnections(server: Server): void {
  const live = new Map<Socket, IncomingMessage | null>();
  tracked.set(server, live);
  const follow = (socket: Socket) => {
    live.set(socket, null);
    socket.once('close', () => live.delete(socket));
  };
  // Under TLS the request's socket is the TLS one ('connection' gives the raw TCP socket beneath).
  server.on(server instanceof TlsServer ? 'secureConnection' : 'connection', follow);
  server.on('request', (req: IncomingMessage) => live.set(req.socket, req));
}

/**
 * At shutdown: closes the connections whose request has not fully arrived (a body still being
 * sent, or headers cut short), as closeIdleConnections does the idle ones. No handler runs for
 * such a request yet, and a client that stalls mid-upload held the close until the forced exit
 * (60 s, exit status 1). Requests received whole, streams among them, are left to finish.
 */
export function dropUnstartedRequests(server: Server): void {
  for (const [socket, req] of tracked.get(server) ?? []) {
    if (!req || !req.complete) socket.destroy();
  }
}
