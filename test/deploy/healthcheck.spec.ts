// docker/healthcheck.cjs, the images' HEALTHCHECK, against a local stand-in for /healthz.
import { spawn } from 'node:child_process';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { DOCKER } from './helpers';

const SCRIPT = join(DOCKER, 'healthcheck.cjs');

function runCheck(env: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SCRIPT], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', (code) => resolve(code ?? -1));
  });
}

describe('docker/healthcheck.cjs', () => {
  let server: Server;
  let status = 200;
  const seen: string[] = [];
  let port = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req.url ?? '');
      res.writeHead(status, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('passes on 200 from /healthz at the port in SVC_ADDR (0.0.0.0 means loopback)', async () => {
    status = 200;
    expect(await runCheck({ SVC_ADDR: `0.0.0.0:${port}` })).toBe(0);
    expect(seen.pop()).toBe('/healthz');
  });

  it('fails on 503 (model loading or failed) and when nothing listens', async () => {
    status = 503;
    expect(await runCheck({ SVC_ADDR: `127.0.0.1:${port}` })).toBe(1);
    expect(await runCheck({ SVC_HEALTH_URL: 'http://127.0.0.1:1/healthz' })).toBe(1);
  });

  it('takes SVC_HEALTH_URL over SVC_ADDR', async () => {
    status = 200;
    expect(await runCheck({ SVC_ADDR: '0.0.0.0:1', SVC_HEALTH_URL: `http://127.0.0.1:${port}/healthz` })).toBe(0);
  });
});
