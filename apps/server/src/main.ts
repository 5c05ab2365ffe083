import 'reflect-metadata';
import type { Server } from 'node:http';
import { bootstrap } from './bootstrap';
import { buildConfig, checkModelFlags, checkFlagFiles, checkProjectorFlag, checkWhisperModel, VERSION } from './config/server-config';
import { FlagError, helpText, parseFlags } from './config/flags';
import { StartupError } from '../../../libs/engine/src/core/errors';
import { InferenceBackend } from '../../../libs/engine/src/backend/inference-backend';
import { runPullCommand } from '../../../libs/store/src/pull/pull-cli';
import { dropUnstartedRequests } from '../../../libs/http/src/connection-drain';

// Logs read from a pipe (a container's, a service manager's) get no colour codes; FORCE_COLOR or a
// NO_COLOR of one's own wins.
if (!process.stdout.isTTY && process.env.FORCE_COLOR === undefined) process.env.NO_COLOR ??= '1';

/**
 * bin/svc.js notes a signal that comes while this code loads. Its handler stays while the server
 * boots: a signal queued for it is delivered only to it (removing the handler dropped that
 * signal). `svc pull` lets it go, so Ctrl-C stops a pull.
 */
const early = globalThis as { __svcEarlySignal?: string; __svcEarlyHandler?: (s: string) => void };
function dropEarlyHandler(): void {
  if (early.__svcEarlyHandler) for (const s of ['SIGTERM', 'SIGINT'] as const) process.off(s, early.__svcEarlyHandler);
}

async function main(): Promise<void> {
  let config;
  try {
    const { flags, positional } = parseFlags(process.argv.slice(2), process.env);
    if (flags.help) {
      console.log(helpText());
      return;
    }
    if (flags.version) {
      console.log(`svc ${VERSION}`);
      return;
    }
    if (positional[0] === 'pull') {
      if (early.__svcEarlySignal) process.exit(early.__svcEarlySignal === 'SIGINT' ? 130 : 143);
      dropEarlyHandler();
      // svc pull <name>: through a running server at -addr (with its key, over HTTPS when given
      // its certificate), else, only when nothing listens there, straight into -store.
      if (positional.length !== 2) throw new FlagError('usage: svc pull <model or URL> [-addr host:port] [-store dir] [-api-key key] [-tls-cert pem]');
      const c = buildConfig(flags);
      checkFlagFiles(flags);
      process.exit(await runPullCommand(positional[1], { host: c.host, port: c.port, storeDir: c.storeDir, apiKey: c.apiKeys[0], tlsCert: c.tlsCert }));
    }
    if (positional.length > 0) throw new FlagError(`unexpected argument "${positional[0]}" (see svc -help)`);
    config = buildConfig(flags);
    checkModelFlags(config);
    checkProjectorFlag(config);
    checkFlagFiles(flags);
    checkWhisperModel(config);
  } catch (err) {
    if (err instanceof FlagError) {
      console.error(`svc: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
  // Installed before the server boots: a signal during the boot (a pod scaled down at once) killed
  // the process with 143; now the boot finishes and the stop below runs.
  let app: Awaited<ReturnType<typeof bootstrap>> | undefined;
  let pending: string | undefined;
  const onSignal = (signal: string) => (app ? stop(app, signal) : (pending ??= signal));
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  app = await bootstrap(config);
  // A signal while bin/svc.js loaded this code counts as one too.
  pending ??= early.__svcEarlySignal;
  if (pending) stop(app, pending);
}

/** Graceful stop: no new requests, running streams end cleanly, the engine is freed. */
let stopping = false;
function stop(app: Awaited<ReturnType<typeof bootstrap>>, signal: string): void {
  const backend = app.get(InferenceBackend);
  if (stopping) {
    // A second signal (Ctrl-C again, as llama-server takes it): stop waiting for running requests.
    console.error(`svc: ${signal} again: exiting now`);
    backend.exitNow(1);
  }
  stopping = true;
  console.error(`svc: ${signal}: finishing running requests`);
  const force = setTimeout(() => backend.exitNow(1), 60_000);
  force.unref();
  // A keep-alive connection whose request finishes during the close stays open and would hold
  // the close until the forced exit: such connections are closed as soon as they go idle, and
  // so are those whose request has not fully arrived.
  const server = app.getHttpServer() as Server;
  const sweep = setInterval(() => {
    server.closeIdleConnections();
    dropUnstartedRequests(server);
  }, 50);
  sweep.unref();
  app.close().then(
    () => process.exit(0),
    (err) => {
      console.error(`svc: shutdown failed: ${(err as Error).message}`);
      process.exit(1);
    },
  );
}

main().catch((err) => {
  console.error(`svc: ${(err as Error).message}`);
  // A flag's file found unusable while the server boots (a word list, a speech model) is a flag error.
  process.exit(err instanceof StartupError ? 2 : 1);
});
