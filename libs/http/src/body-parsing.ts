import { FastifyInstance } from 'fastify';
import { errorBody } from './http-errors';

/**
 * JSON bodies: 413 decided from Content-Length before anything is read, and
 * parse failures answered as "malformed JSON: <reason with offset>".
 */
export function installBodyParsing(fastify: FastifyInstance, limit: number, largeBodyRoutes: RegExp[] = []): void {
  fastify.addHook('onRequest', (req, reply, done) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    const path = req.url.split('?')[0];
    if (declared > limit && !largeBodyRoutes.some((r) => r.test(path))) {
      void reply
        .status(413)
        .header('connection', 'close')
        .send(errorBody(path, 413, `request body is ${declared} bytes; this server accepts ${limit}`));
      return;
    }
    done();
  });
  fastify.removeContentTypeParser('application/json');
  fastify.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: limit }, (_req, body, done) => {
    const text = body as string;
    if (text.trim() === '') return done(null, {});
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      const e = Object.assign(new Error(`malformed JSON: ${(err as Error).message}`), { statusCode: 400 });
      done(e, undefined);
    }
  });
}
