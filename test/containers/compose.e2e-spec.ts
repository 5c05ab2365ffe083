// The compose stack (docker/compose.yaml: svc from the CPU image + Prometheus) brought up by
// podman-compose, as a user would: svc answers a completion through the official OpenAI
// client, and Prometheus, over the stack's own network, scrapes svc's /metrics: the target
// is `up` in its HTTP API and a query returns svc's counter for the tokens just generated.
//
// Needs podman, podman-compose and the local Prometheus stand-in image:
//   eval "$(bash scripts/podman-setup.sh up)"     (installs and makes them; see the script)
// The svc image is built by compose from docker/Dockerfile.cpu with podman's layer cache,
// so after image.e2e-spec.ts (or any earlier build of the same tree) it takes seconds.
// Own project name and free ports: runs beside other stacks. Always `down -v` afterwards.
import OpenAI from 'openai';
import { join } from 'node:path';
import { freePort, Health, imageExists, MODEL_FILE, MODELS_DIR, requireModel, ROOT, sh, SKIP, waitFor } from './support';

const COMPOSE_FILE = join(ROOT, 'docker', 'compose.yaml');
const PROJECT = `svc-compose-test-${process.pid}`;
const IMAGE = process.env.SVC_COMPOSE_TEST_IMAGE ?? 'localhost/svc-compose-test:cpu';
const PROMETHEUS_IMAGE = 'docker.io/prom/prometheus:v2.55.1';

interface Target {
  labels: Record<string, string>;
  scrapeUrl: string;
  health: string;
  lastError: string;
}
interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

const suite = SKIP ? describe.skip : describe;
if (SKIP) console.warn('SVC_SKIP_CONTAINERS=1: the compose stack test is skipped');

suite('compose stack (docker/compose.yaml) under podman-compose', () => {
  let env: NodeJS.ProcessEnv;
  let svcUrl = '';
  let promUrl = '';
  let completionTokens = 0;

  /** podman-compose for this project; fails on its exit code or a podman step's ("exit code: N"). */
  const compose = async (args: string[], timeoutMs = 120_000, check = true): Promise<string> => {
    const r = await sh('podman-compose', ['-p', PROJECT, '-f', COMPOSE_FILE, ...args], { env, timeoutMs });
    const failed = r.code !== 0 || /exit code: [1-9]/.test(r.out) || /Traceback \(most recent call last\)/.test(r.out);
    if (check && failed) throw new Error(`podman-compose ${args.join(' ')} failed (${r.code}):\n${r.out.slice(-4000)}`);
    return r.out;
  };

  const prometheus = async <T>(path: string): Promise<T> => {
    const r = await fetch(`${promUrl}${path}`);
    const body = (await r.json()) as { status: string; data: T; error?: string };
    if (r.status !== 200 || body.status !== 'success') throw new Error(`${path}: ${r.status} ${body.error ?? ''}`);
    return body.data;
  };

  beforeAll(async () => {
    requireModel();
    const version = await sh('podman-compose', ['version']);
    if (version.code !== 0) throw new Error(`podman-compose is missing (bash scripts/podman-setup.sh install): ${version.out}`);
    if (!(await imageExists(PROMETHEUS_IMAGE))) throw new Error(`${PROMETHEUS_IMAGE} is missing: bash scripts/podman-setup.sh base makes it`);
    const [svcPort, promPort] = [await freePort(), await freePort()];
    svcUrl = `http://127.0.0.1:${svcPort}`;
    promUrl = `http://127.0.0.1:${promPort}`;
    env = { ...process.env, SVC_IMAGE: IMAGE, SVC_MODELS_DIR: MODELS_DIR, SVC_MODEL: MODEL_FILE, SVC_PORT: String(svcPort), PROMETHEUS_PORT: String(promPort), SVC_CONCURRENCY: '2' };
    // No keys in this stack (compose passes the shell's through): /metrics stays open to Prometheus.
    delete env.SVC_API_KEY;
    delete env.SVC_CONTEXT_KEY;

    const t0 = Date.now();
    // --format docker keeps HEALTHCHECK and matches the layers other builds of this tree cached.
    await compose(['--podman-build-args=--format docker', 'build', 'svc'], 60 * 60_000);
    console.log(`compose build svc (${IMAGE}): ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    await compose(['up', '-d']);
    await waitFor('svc /healthz 200 through the published port', 180_000, async () => ((await fetch(`${svcUrl}/healthz`)).status === 200 ? true : undefined));
    console.log(`compose stack ${PROJECT} up in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }, 65 * 60_000);

  afterAll(async () => {
    if (!env) return;
    const out = await compose(['down', '-v'], 120_000, false);
    // podman-compose 1.0.3 leaves the network (and anything a failed `up` half-made): clear by label/name.
    const label = `label=io.podman.compose.project=${PROJECT}`;
    const left = (await sh('podman', ['ps', '-aq', '--filter', label])).out.split('\n').filter(Boolean);
    if (left.length) await sh('podman', ['rm', '-f', ...left]);
    const vols = (await sh('podman', ['volume', 'ls', '-q', '--filter', label])).out.split('\n').filter(Boolean);
    if (vols.length) await sh('podman', ['volume', 'rm', '-f', ...vols]);
    await sh('podman', ['network', 'rm', '-f', `${PROJECT}_default`]);
    if (left.length || vols.length) console.warn(`compose down -v left ${left.length} containers, ${vols.length} volumes:\n${out.slice(-2000)}`);
  }, 180_000);

  it('serves /healthz and a completion through the official openai client', async () => {
    const h = (await (await fetch(`${svcUrl}/healthz`)).json()) as Health;
    expect(h).toMatchObject({ status: 'ok', model: 'stories260K', backend: 'cpu' });
    const client = new OpenAI({ baseURL: `${svcUrl}/v1`, apiKey: 'no-key-needed', maxRetries: 0, timeout: 60_000 });
    const r = await client.completions.create({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 16, temperature: 0 });
    expect(r.object).toBe('text_completion');
    expect(r.choices[0].text.length).toBeGreaterThan(0);
    completionTokens = r.usage!.completion_tokens;
    expect(completionTokens).toBeGreaterThan(0);
    // compose's healthcheck reached the container (podman-compose turns it into --healthcheck-*).
    const hc = await sh('podman', ['healthcheck', 'run', `${PROJECT}_svc_1`]);
    expect(hc).toMatchObject({ code: 0 });
  }, 120_000);

  it('has Prometheus scrape svc over the stack network: target up, svc metrics queryable', async () => {
    expect(completionTokens).toBeGreaterThan(0);
    // The target is `svc:11435` (compose DNS), scraped every 15 s: the first scrape may precede svc's start.
    const target = await waitFor('the svc target to be up', 90_000, async () => {
      const { activeTargets } = await prometheus<{ activeTargets: Target[] }>('/api/v1/targets');
      return activeTargets.find((t) => t.labels.job === 'svc' && t.health === 'up');
    });
    expect(target).toMatchObject({ scrapeUrl: 'http://svc:11435/metrics', lastError: '' });
    expect(target.labels.instance).toBe('svc:11435');

    // svc's own counter, as scraped after the completion above: the tokens it generated, no more.
    const query = encodeURIComponent('svc_generated_tokens_total{job="svc",model="stories260K"}');
    const sample = await waitFor('a scrape that saw the completion', 90_000, async () => {
      const { result } = await prometheus<{ resultType: string; result: Sample[] }>(`/api/v1/query?query=${query}`);
      return result.find((s) => Number(s.value[1]) > 0);
    });
    expect(Number(sample.value[1])).toBe(completionTokens);
    expect(sample.metric).toMatchObject({ job: 'svc', instance: 'svc:11435', model: 'stories260K' });

    const up = await prometheus<{ result: Sample[] }>(`/api/v1/query?query=${encodeURIComponent('up{job="svc"}')}`);
    expect(up.result.map((s) => s.value[1])).toEqual(['1']);
  }, 200_000);
});
