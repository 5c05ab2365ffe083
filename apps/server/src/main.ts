import 'reflect-metadata';
import type { Server } from 'node:http';
import { bootstrap } from './bootstrap';
import { buildConfig, checkDefaultModelFile, VERSION } from './config/server-config';
import { FlagError, helpText, parseFlags } from './config/flags';
import { runPullCommand } from '../../../libs/store/src/pull/pull-cli';
import { dropUnstartedRequests } from '../../../libs/http/src/connection-drain';

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
      // svc pull <name>: through a running server at -addr, else straight into -store.
      if (positional.length !== 2) throw new FlagError('usage: svc pull <model or URL> [-addr host:port] [-store dir]');
      const c = buildConfig(flags);
      process.exit(await runPullCommand(positional[1], { host: c.host, port: c.port, storeDir: c.storeDir }));
    }
    if (positional.length > 0) throw new FlagError(`unexpected argument "${positional[0]}" (see svc -help)`);
    config = buildConfig(flags);
    checkDefaultModelFile(config);
  } catch (err) {
    if (err instanceof FlagError) {
      console.error(`svc: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
  const app = await bootstrap(config);
  // Graceful stop: no new requests, running streams end cleanly, the engine is freed.
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.error(`svc: ${signal}: finishing running requests`);
    const force = setTimeout(() => process.exit(1), 60_000);
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
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err) => {
  console.error(`svc: ${(err as Error).message}`);
  process.exit(1);
});
