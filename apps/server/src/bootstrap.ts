import { X509Certificate } from 'node:crypto';
import { createSecureContext } from 'node:tls';
import { Logger, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { readFileSync } from 'node:fs';
import { InferenceBackend } from '../../../libs/engine/src/backend/inference-backend';
import { loadBackend } from '../../../libs/engine/src/backend/backend-loader';
import { ModelManager } from '../../../libs/engine/src/models/model-manager';
import { loadDefaultModel as loadDefaultWeights } from '../../../libs/engine/src/models/default-model';
import { EncoderPool } from '../../../libs/engine/src/embeddings/encoder-pool';
import { NoModelError, StartupError } from '../../../libs/engine/src/core/errors';
import { installBodyParsing } from '../../../libs/http/src/body-parsing';
import { trackConnections } from '../../../libs/http/src/connection-drain';
import { HttpErrorFilter } from '../../../libs/http/src/error.filter';
import { originForm } from '../../../libs/http/src/request-target';
import { clientErrorHandler, frameworkErrors, refuseWhileClosing } from '../../../libs/http/src/transport-errors';
import { validationPipe } from '../../../libs/http/src/validation';
import { BootState } from '../../../libs/observability/src/boot-state';
import { MetricsService } from '../../../libs/observability/src/metrics.service';
import { AppModule } from './app.module';
import { Lexicon } from '../../../libs/engine/src/constraints/lexicon';
import { LEXICON } from '../../../libs/engine/src/engine.service';
import { ModelCatalog } from '../../../libs/store/src/catalog';
import { snapshotBodyLimit } from '../../../libs/contexts/src/contexts.service';
import { AUDIO_BODY_LIMIT } from '../../../libs/speech/src/audio/limits';
import { BODY_LIMIT, ServerConfig } from './config/server-config';

const LEVELS: Record<ServerConfig['logLevel'], LogLevel[]> = {
  error: ['fatal', 'error'],
  warn: ['fatal', 'error', 'warn'],
  log: ['fatal', 'error', 'warn', 'log'],
  debug: ['fatal', 'error', 'warn', 'log', 'debug', 'verbose'],
};

const REQUEST_TIMEOUT_MS = 300_000;

/** Builds and starts the HTTP server; the returned app is closed on SIGTERM by main. */
export async function bootstrap(config: ServerConfig, backend?: InferenceBackend): Promise<NestFastifyApplication> {
  const log = new Logger('svc');
  const engineBackend = backend ?? loadBackend(config.backend);
  // -tls-client-ca: mutual TLS; a client without a certificate from that CA fails the handshake (libs/auth).
  const mtls = config.auth.tlsClientCa ? { ca: readFileSync(config.auth.tlsClientCa), requestCert: true, rejectUnauthorized: true } : {};
  const https = config.tlsCert ? tlsOptions(config.tlsCert, config.tlsKey, mtls) : undefined;
  // No Nest middleware is used: without @fastify/middie no request pays for a middleware
  // pass (a module that adds one fails at boot, as fastify then has no use()).
  // Errors answered before any route runs get the spec's shape too (`as never`: Fastify types that
  // hook generically over every server kind; ours is plain HTTP(S)).
  // requestTimeout: a request must arrive whole within Node's default 300 s (Fastify turns it
  // off), so a client that stalls mid-upload does not hold its connection forever.
  const adapter = new FastifyAdapter({ bodyLimit: BODY_LIMIT, skipMiddie: true, rewriteUrl: originForm, requestTimeout: REQUEST_TIMEOUT_MS, frameworkErrors: frameworkErrors as never, clientErrorHandler, return503OnClosing: false, ...(https ? { https } : {}) });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config, engineBackend), adapter, {
    logger: LEVELS[config.logLevel],
    bodyParser: false,
  });
  const fastify = app.getHttpAdapter().getInstance();
  refuseWhileClosing(fastify);
  const catalog = app.get(ModelCatalog);
  installBodyParsing(fastify, BODY_LIMIT, [
    {
      // Snapshots and imports: sized to the largest context the named model can hold.
      pattern: /^\/v1\/contexts\/(restore|import)$/,
      limit: (url) => {
        try {
          return Math.max(BODY_LIMIT, snapshotBodyLimit(catalog.resolve(url.searchParams.get('model') ?? '').meta?.kv, config.engine.ctxSize));
        } catch {
          return BODY_LIMIT; // unknown model: the route answers 404 itself
        }
      },
    },
    // Audio uploads (multipart or a WAV body) are read whole, as bytes, by the audio routes; without
    // -whisper they are refused anyway, and took 128 MiB first.
    { pattern: /^\/v1\/audio\/(transcriptions|translations)$/, limit: () => (config.features.whisper ? AUDIO_BODY_LIMIT : BODY_LIMIT) },
  ]);
  const lexicon = app.get<Lexicon | null>(LEXICON);
  if (lexicon) log.log(`lexicon: ${lexicon.words.length} words from ${config.features.lexicon}${lexicon.skipped ? ` (${lexicon.skipped} lines that are not one word skipped)` : ''}`);
  const metrics = app.get(MetricsService);
  fastify.addHook('onResponse', (req, reply, done) => {
    metrics.observeHttp(req.method, req.routeOptions?.url ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
  // A client gone before its answer ended (a stream cut, a request left waiting) never reaches
  // onResponse: counted as 499, nginx's "client closed request", so every request is in the counter.
  fastify.addHook('onRequest', (req, reply, done) => {
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) metrics.observeHttp(req.method, req.routeOptions?.url ?? 'unmatched', 499, reply.elapsedTime / 1000);
    });
    done();
  });
  app.useGlobalFilters(new HttpErrorFilter());
  app.useGlobalPipes(validationPipe());
  trackConnections(app.getHttpServer());
  await app.listen(config.port, config.host);
  // The address bound (port 0 picks one; an IPv6 host is bracketed in a URL).
  const bound = app.getHttpServer().address() as { address: string; port: number } | null;
  const host = bound?.address ?? config.host;
  log.log(`listening on ${https ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${bound?.port ?? config.port} (backend ${engineBackend.name})`);
  void loadDefaultModel(app, log);
  return app;
}

/**
 * The certificate and key, checked as TLS will use them: a key that is missing (-tls-key defaults
 * to the -tls-cert file) or does not match is the flags' mistake (exit 2), not OpenSSL's words.
 */
function tlsOptions(certPath: string, keyPath: string | undefined, mtls: { ca?: Buffer }): { cert: Buffer; key: Buffer; ca?: Buffer } {
  const opts = { cert: readFileSync(certPath), key: readFileSync(keyPath ?? certPath), ...mtls };
  // A CA file with no certificate in it boots, then fails every handshake: said at once instead.
  if (opts.ca) {
    try {
      new X509Certificate(opts.ca);
    } catch (err) {
      throw new StartupError(`flag -tls-client-ca: holds no PEM certificate (${(err as Error).message})`);
    }
  }
  try {
    createSecureContext(opts);
  } catch (err) {
    const which = keyPath ? `-tls-cert ${certPath} and -tls-key ${keyPath}` : `-tls-cert ${certPath} (and no -tls-key: the key is looked for in the same file)`;
    throw new StartupError(`flags ${which}: not a PEM certificate and its private key (${(err as Error).message})`);
  }
  return opts;
}

/** Loads the default model after listening, so /healthz can report "loading". */
async function loadDefaultModel(app: NestFastifyApplication, log: Logger): Promise<void> {
  const boot = app.get(BootState);
  try {
    boot.model = await loadDefaultWeights(app.get(ModelManager), app.get(EncoderPool));
    boot.state = 'ready';
  } catch (err) {
    if (err instanceof NoModelError) {
      boot.state = 'no-model';
      boot.noModel = err.message;
      log.warn(`${err.message}: generation routes answer 503 until then`);
      return;
    }
    if (err instanceof StartupError) {
      // A flag's file the load found unusable (-mmproj): a startup error (exit 2), as at parse time.
      console.error(`svc: ${err.message}`);
      process.exit(2);
    }
    boot.state = 'failed';
    boot.error = (err as Error).message;
    log.error(`loading the default model failed: ${boot.error}`);
  }
}
