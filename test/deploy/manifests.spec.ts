// The deployment files, read as data and checked against the server itself: the ports,
// paths and flags in the manifests and images are fed through the server's own flag parser
// (parseFlags + buildConfig), so a manifest that disagrees with the server fails here.
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative } from 'node:path';
import { parseFlags } from '../../apps/server/src/config/flags';
import { buildConfig, ServerConfig } from '../../apps/server/src/config/server-config';
import {
  Doc,
  DOCKER,
  dockerfile,
  envOf,
  finalStage,
  find,
  K8S,
  kustomize,
  parseDockerfile,
  readYaml,
  readYamlDocs,
  ROOT,
  yamlFilesUnder,
} from './helpers';

const HEALTH_PATH = '/healthz';
const SERVER_DEFAULT_PORT = buildConfig(parseFlags([]).flags).port;

type Probe = { httpGet?: { path: string; port: number | string; scheme?: string }; periodSeconds?: number; failureThreshold?: number; timeoutSeconds?: number };

function workload(docs: Doc[]): Doc {
  return find(docs, 'StatefulSet', 'svc');
}

function container(docs: Doc[]): Doc {
  const c = (workload(docs).spec.template.spec.containers as Doc[]).find((x) => x.name === 'svc');
  if (!c) throw new Error('no container named svc');
  return c;
}

/** A named or numbered port of the svc container, as a number. */
function portNumber(c: Doc, port: number | string): number {
  if (typeof port === 'number') return port;
  if (/^\d+$/.test(port)) return Number(port);
  const p = (c.ports as Doc[]).find((x) => x.name === port);
  if (!p) throw new Error(`container has no port named ${port}`);
  return p.containerPort;
}

/** The server config a pod would boot with: its args and env through the real flag parser. */
function podServerConfig(docs: Doc[]): ServerConfig {
  const c = container(docs);
  const env: Record<string, string> = {};
  for (const ref of (c.envFrom ?? []) as Doc[]) {
    if (ref.configMapRef) Object.assign(env, find(docs, 'ConfigMap', ref.configMapRef.name).data);
  }
  for (const e of (c.env ?? []) as Doc[]) {
    if (e.value !== undefined) env[e.name] = String(e.value);
    else if (e.valueFrom?.secretKeyRef) env[e.name] = `secret-${e.valueFrom.secretKeyRef.key}`;
    else if (e.valueFrom?.resourceFieldRef) env[e.name] = '2';
  }
  return buildConfig(parseFlags((c.args ?? []) as string[], env).flags);
}

function budgetSeconds(p: Probe): number {
  return (p.periodSeconds ?? 10) * (p.failureThreshold ?? 3);
}

function mountFor(c: Doc, path: string): Doc | undefined {
  return ((c.volumeMounts ?? []) as Doc[])
    .filter((m) => path === m.mountPath || path.startsWith(`${m.mountPath.replace(/\/$/, '')}/`))
    .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
}

const base = kustomize(join(K8S, 'base'));
const cuda = kustomize(join(K8S, 'overlays', 'cuda'));
const podTls = kustomize(join(K8S, 'overlays', 'pod-tls'));
const variants: [string, Doc[]][] = [
  ['base (cpu)', base],
  ['overlays/cuda', cuda],
  ['overlays/pod-tls', podTls],
];

describe('deploy/k8s: every file', () => {
  const files = yamlFilesUnder(K8S);

  it('parses, and every object is namespace-less with kind and name', () => {
    expect(files.length).toBeGreaterThan(8);
    for (const f of files) {
      const docs = readYamlDocs(f);
      expect(docs.length).toBeGreaterThan(0);
      for (const d of docs) {
        const where = relative(ROOT, f);
        expect([where, typeof d.apiVersion]).toEqual([where, 'string']);
        expect([where, typeof d.kind]).toEqual([where, 'string']);
        if (d.kind !== 'Kustomization') expect([where, typeof d.metadata?.name]).toEqual([where, 'string']);
        expect([where, d.metadata?.namespace]).toEqual([where, undefined]);
      }
    }
  });

  it('base lists every manifest in its folder except the *.example.yaml Secrets', () => {
    const k = readYaml(join(K8S, 'base', 'kustomization.yaml'));
    const listed = new Set(k.resources as string[]);
    const inFolder = files.filter((f) => f.startsWith(join(K8S, 'base') + '/')).map((f) => basename(f));
    for (const f of inFolder) {
      if (f === 'kustomization.yaml') continue;
      if (f.endsWith('.example.yaml')) expect(listed.has(f)).toBe(false);
      else expect([f, listed.has(f)]).toEqual([f, true]);
    }
  });
});

describe.each(variants)('deploy/k8s %s', (_name, docs) => {
  const c = container(docs);
  const cfg = podServerConfig(docs);

  it('listens where the container port says, on all interfaces', () => {
    const http = (c.ports as Doc[]).find((p) => p.name === 'http');
    expect(http?.containerPort).toBe(SERVER_DEFAULT_PORT);
    expect(cfg.port).toBe(http?.containerPort);
    expect(['0.0.0.0', '::', '']).toContain(cfg.host);
  });

  it('Services send their traffic to that port', () => {
    for (const name of ['svc', 'svc-headless']) {
      const s = find(docs, 'Service', name);
      expect(s.spec.selector).toEqual(workload(docs).spec.template.metadata.labels);
      for (const p of s.spec.ports as Doc[]) expect(portNumber(c, p.targetPort)).toBe(cfg.port);
    }
    expect(find(docs, 'Service', 'svc-headless').spec.clusterIP).toBe('None');
    expect(workload(docs).spec.serviceName).toBe('svc-headless');
    expect(workload(docs).spec.selector.matchLabels).toEqual(workload(docs).spec.template.metadata.labels);
  });

  it('probes /healthz on the server port, with the scheme the server serves', () => {
    const scheme = cfg.tlsCert ? 'HTTPS' : 'HTTP';
    for (const kind of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
      const p = c[kind] as Probe;
      expect([kind, p?.httpGet?.path]).toEqual([kind, HEALTH_PATH]);
      expect(portNumber(c, p.httpGet!.port)).toBe(cfg.port);
      expect([kind, p.httpGet!.scheme ?? 'HTTP']).toEqual([kind, scheme]);
      expect(p.timeoutSeconds ?? 1).toBeGreaterThanOrEqual(2);
    }
  });

  it('gives the model load a startup budget of at least 10 minutes before liveness counts', () => {
    expect(budgetSeconds(c.startupProbe)).toBeGreaterThanOrEqual(600);
    // Liveness tolerates a busy minute; readiness reacts faster than liveness.
    expect(budgetSeconds(c.livenessProbe)).toBeGreaterThanOrEqual(60);
    expect(budgetSeconds(c.readinessProbe)).toBeLessThan(budgetSeconds(c.livenessProbe));
  });

  it('keeps the store on a PersistentVolumeClaim mounted at the store path', () => {
    const m = mountFor(c, cfg.storeDir);
    expect(m).toBeDefined();
    expect(m!.readOnly).not.toBe(true);
    const claim = (workload(docs).spec.volumeClaimTemplates as Doc[]).find((t) => t.metadata.name === m!.name);
    expect(claim).toBeDefined();
    expect(claim!.spec.accessModes).toContain('ReadWriteOnce');
    expect(claim!.spec.resources.requests.storage).toMatch(/^\d+(Gi|Ti)$/);
  });

  it('reads the default model from the read-only models claim', () => {
    expect(cfg.defaultModel).toMatch(/^\/models\//);
    const m = mountFor(c, cfg.defaultModel!);
    expect(m?.readOnly).toBe(true);
    const vol = (workload(docs).spec.template.spec.volumes as Doc[]).find((v) => v.name === m!.name);
    const pvc = find(docs, 'PersistentVolumeClaim', vol!.persistentVolumeClaim.claimName);
    expect(pvc.spec.accessModes).toContain('ReadOnlyMany');
  });

  it('takes the API keys and the context key from the Secret', () => {
    const secret = readYamlDocs(join(K8S, 'base', 'secret.example.yaml'))[0];
    const refs = Object.fromEntries(((c.env ?? []) as Doc[]).filter((e) => e.valueFrom?.secretKeyRef).map((e) => [e.name, e.valueFrom.secretKeyRef]));
    for (const v of ['SVC_API_KEY', 'SVC_CONTEXT_KEY']) {
      expect(refs[v]?.name).toBe(secret.metadata.name);
      expect(Object.keys(secret.stringData)).toContain(refs[v].key);
      expect(refs[v].optional).not.toBe(true);
    }
    expect(cfg.apiKeys).toEqual(['secret-api-keys']);
    expect(cfg.features.contextKey).toBe('secret-context-key');
  });

  it('runs as the image\'s non-root user, without privileges, on a read-only root', () => {
    const pod = workload(docs).spec.template.spec.securityContext;
    const user = finalStage(parseDockerfile(dockerfile('Dockerfile.cpu'))).find((i) => i.cmd === 'USER')!.args;
    expect(pod.runAsNonRoot).toBe(true);
    expect(pod.runAsUser).toBeGreaterThan(0);
    expect(`${pod.runAsUser}:${pod.runAsGroup}`).toBe(user);
    expect(pod.fsGroup).toBe(pod.runAsGroup);
    expect(c.securityContext.allowPrivilegeEscalation).toBe(false);
    expect(c.securityContext.readOnlyRootFilesystem).toBe(true);
    expect(c.securityContext.capabilities.drop).toContain('ALL');
    expect(mountFor(c, '/tmp/x')).toBeDefined();
  });

  it('spills contexts to the store\'s volume ($TMPDIR), not the small /tmp emptyDir', () => {
    const tmp = ((c.env ?? []) as Doc[]).find((e) => e.name === 'TMPDIR')?.value as string;
    expect(tmp).toBeDefined();
    expect(mountFor(c, `${tmp}/svc-1/spill`)?.name).toBe('store');
  });

  it('gives running generations the server\'s 60 s drain, after a preStop pause, inside the grace period', () => {
    const pause = Number(c.lifecycle.preStop.exec.command[1]);
    expect(c.lifecycle.preStop.exec.command[0]).toBe('sleep');
    expect(workload(docs).spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThan(pause + 60);
  });

  it('requests resources', () => {
    expect(c.resources.requests.cpu).toBeDefined();
    expect(c.resources.requests.memory).toMatch(/^\d+(Mi|Gi)$/);
    expect(c.resources.limits.memory).toMatch(/^\d+(Mi|Gi)$/);
  });

  it('exposes HTTPS at the Ingress with the TLS Secret and header-hash affinity', () => {
    const ing = find(docs, 'Ingress', 'svc');
    const tlsSecret = readYamlDocs(join(K8S, 'base', 'tls-secret.example.yaml'))[0];
    expect(tlsSecret.type).toBe('kubernetes.io/tls');
    expect(ing.spec.tls[0].secretName).toBe(tlsSecret.metadata.name);
    expect(ing.metadata.annotations['nginx.ingress.kubernetes.io/upstream-hash-by']).toBe('$http_x_svc_affinity');
    const backend = ing.spec.rules[0].http.paths[0].backend.service;
    const s = find(docs, 'Service', backend.name);
    expect((s.spec.ports as Doc[]).map((p) => p.name)).toContain(backend.port.name);
  });

  it('runs several replicas, kept available through disruptions', () => {
    expect(workload(docs).spec.replicas).toBeGreaterThanOrEqual(2);
    expect(find(docs, 'PodDisruptionBudget', 'svc').spec.selector.matchLabels).toEqual(workload(docs).spec.template.metadata.labels);
  });
});

describe('deploy/k8s variants', () => {
  it('base runs the CPU image without GPUs', () => {
    const c = container(base);
    expect(c.image).toBe('svc:cpu');
    expect(JSON.stringify(c.resources)).not.toContain('nvidia.com/gpu');
  });

  it('cuda requests one GPU per replica, runs the CUDA image and waits longer for the load', () => {
    const c = container(cuda);
    expect(c.image).toBe('svc:cuda');
    expect(Number(c.resources.limits['nvidia.com/gpu'])).toBeGreaterThanOrEqual(1);
    expect(c.resources.requests['nvidia.com/gpu']).toBe(c.resources.limits['nvidia.com/gpu']);
    expect(podServerConfig(cuda).backend).toBe('cuda');
    expect(budgetSeconds(c.startupProbe)).toBeGreaterThanOrEqual(budgetSeconds(container(base).startupProbe));
    expect((workload(cuda).spec.template.spec.tolerations as Doc[]).map((t) => t.key)).toContain('nvidia.com/gpu');
  });

  it('cuda keeps the CUDA image when the base\'s image is set (kustomize edit set image svc=...)', () => {
    // The overlay matched the base's image name: once renamed it ran the CPU image with SVC_BACKEND=cuda.
    const copy = mkdtempSync(join(tmpdir(), 'svc-k8s-'));
    try {
      cpSync(K8S, copy, { recursive: true });
      const kfile = join(copy, 'base', 'kustomization.yaml');
      writeFileSync(kfile, readFileSync(kfile, 'utf8').replace(/newName: svc\n(\s+)newTag: cpu/, 'newName: registry.example.com/svc\n$1newTag: 0.3.0-cpu'));
      expect(container(kustomize(join(copy, 'base'))).image).toBe('registry.example.com/svc:0.3.0-cpu');
      expect(container(kustomize(join(copy, 'overlays', 'cuda'))).image).toBe('svc:cuda');
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it('pod-tls serves the Secret\'s certificate from the pods and tells the Ingress', () => {
    const c = container(podTls);
    const cfg = podServerConfig(podTls);
    expect(cfg.tlsCert).toBeDefined();
    expect(cfg.tlsKey).toBeDefined();
    for (const file of [cfg.tlsCert!, cfg.tlsKey!]) {
      const m = mountFor(c, file);
      const vol = (workload(podTls).spec.template.spec.volumes as Doc[]).find((v) => v.name === m?.name);
      expect(vol?.secret?.secretName).toBe('svc-tls');
      expect(['tls.crt', 'tls.key']).toContain(basename(file));
    }
    expect(find(podTls, 'Ingress', 'svc').metadata.annotations['nginx.ingress.kubernetes.io/backend-protocol']).toBe('HTTPS');
    // An annotation-based scrape of an HTTPS-only pod needs the scheme (it tried plain HTTP), the base's other annotations kept.
    expect(workload(podTls).spec.template.metadata.annotations).toMatchObject({ 'prometheus.io/scheme': 'https', 'prometheus.io/scrape': 'true', 'prometheus.io/path': '/metrics' });
    expect(workload(base).spec.template.metadata.annotations['prometheus.io/scheme']).toBeUndefined();
  });

  it('optional HPA scales the StatefulSet, and the Istio rule hashes the same header', () => {
    const hpa = readYamlDocs(join(K8S, 'optional', 'hpa.yaml'))[0];
    expect(hpa.spec.scaleTargetRef).toMatchObject({ kind: 'StatefulSet', name: workload(base).metadata.name });
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
    const dr = readYamlDocs(join(K8S, 'optional', 'istio-destinationrule.yaml'))[0];
    expect(dr.spec.trafficPolicy.loadBalancer.consistentHash.httpHeaderName).toBe('x-svc-affinity');
    expect(dr.spec.host).toBe(find(base, 'Service', 'svc').metadata.name);
  });
});

describe.each([['Dockerfile.cpu'], ['Dockerfile.cuda']])('docker/%s', (file) => {
  const ins = parseDockerfile(dockerfile(file));
  const rt = finalStage(ins);
  const env = envOf(rt);
  const cfg = buildConfig(parseFlags([], env).flags);
  const run = ins.filter((i) => i.cmd === 'RUN').map((i) => i.args).join('\n');

  it('is multi-stage: compilers in the builders only', () => {
    expect(new Set(ins.map((i) => i.stage)).size).toBeGreaterThanOrEqual(3);
    expect(rt.filter((i) => i.cmd === 'RUN').map((i) => i.args).join(' ')).not.toMatch(/\b(g\+\+|cmake|build-essential)\b/);
  });

  it('exposes the port the server listens on, on all interfaces', () => {
    const exposed = rt.filter((i) => i.cmd === 'EXPOSE').map((i) => Number(i.args.split('/')[0]));
    expect(exposed).toEqual([cfg.port]);
    expect(cfg.port).toBe(SERVER_DEFAULT_PORT);
    expect(cfg.host).toBe('0.0.0.0');
  });

  it('keeps the store on a volume and runs as a numeric non-root user', () => {
    const vols = rt.filter((i) => i.cmd === 'VOLUME').flatMap((i) => JSON.parse(i.args) as string[]);
    expect(vols.some((v) => cfg.storeDir.startsWith(`${v}/`) || cfg.storeDir === v)).toBe(true);
    const user = rt.filter((i) => i.cmd === 'USER').pop()?.args ?? '';
    expect(user).toMatch(/^\d+:\d+$/);
    expect(Number(user.split(':')[0])).toBeGreaterThan(0);
  });

  it('has a HEALTHCHECK on /healthz through the shipped healthcheck script', () => {
    const hc = rt.find((i) => i.cmd === 'HEALTHCHECK');
    expect(hc?.args).toMatch(/CMD \["node", "\/app\/docker\/healthcheck\.cjs"\]/);
    expect(hc?.args).toMatch(/--start-period=\d+s/);
    expect(readFileSync(join(DOCKER, 'healthcheck.cjs'), 'utf8')).toContain(HEALTH_PATH);
    expect(rt.some((i) => i.cmd === 'COPY' && i.args.includes('docker/healthcheck.cjs'))).toBe(true);
  });

  it('starts the server under an init, flags through CMD', () => {
    const ep = JSON.parse(rt.find((i) => i.cmd === 'ENTRYPOINT')!.args) as string[];
    expect(ep[0]).toMatch(/tini$/);
    expect(ep.slice(-2)).toEqual(['node', '/app/bin/svc.js']);
    expect(JSON.parse(rt.find((i) => i.cmd === 'CMD')!.args)).toEqual([]);
  });

  it('builds the addon portably, in a layer before the TypeScript sources are copied', () => {
    const nativeRun = ins.findIndex((i) => i.cmd === 'RUN' && i.args.includes('scripts/build-native.mjs'));
    const tsCopy = ins.findIndex((i) => i.cmd === 'COPY' && /^(apps|libs)\//.test(i.args));
    expect(nativeRun).toBeGreaterThan(-1);
    expect(ins[nativeRun].stage).not.toBe(ins[tsCopy].stage);
    const nativeStage = ins.filter((i) => i.stage === ins[nativeRun].stage);
    expect(nativeStage.filter((i) => i.cmd === 'COPY').map((i) => i.args.split(/\s+/)[0])).not.toEqual(expect.arrayContaining(['apps/', 'libs/', 'package.json']));
    for (const line of run.split('\n').filter((l) => l.includes('build-native.mjs'))) expect(line).toContain('--portable');
    expect(existsSync(join(ROOT, 'scripts', 'build-native.mjs'))).toBe(true);
  });

  if (file === 'Dockerfile.cuda') {
    it('builds both the cpu and the cuda addons on an NVIDIA CUDA base', () => {
      expect(run).toMatch(/build-native\.mjs --backend cpu/);
      expect(run).toMatch(/build-native\.mjs --backend cuda/);
      expect(ins.filter((i) => i.cmd === 'FROM').map((i) => i.args).join(' ')).toMatch(/nvidia\/cuda:\$\{CUDA_VERSION\}-runtime/);
      expect(ins.find((i) => i.cmd === 'ARG' && i.args.startsWith('CUDA_ARCHS'))?.args).toMatch(/75;80;86;89;90/);
      expect(env.SVC_BACKEND).toBe('auto');
    });
  }
});

describe('docker/compose.yaml and prometheus.yml', () => {
  const compose = readYaml(join(DOCKER, 'compose.yaml'));
  const prom = readYaml(join(DOCKER, 'prometheus.yml'));

  it('runs svc from the CPU Dockerfile with the store on a volume and the port published', () => {
    const svc = compose.services.svc;
    expect(svc.build).toEqual({ context: '..', dockerfile: 'docker/Dockerfile.cpu' });
    expect(svc.ports.some((p: string) => p.endsWith(`:${SERVER_DEFAULT_PORT}`))).toBe(true);
    expect(svc.volumes).toContain('svc-store:/data');
    expect(Object.keys(compose.volumes)).toContain('svc-store');
  });

  it('has a GPU override that turns the same service into the CUDA image', () => {
    const cuda = readYaml(join(DOCKER, 'compose.cuda.yaml'));
    expect(Object.keys(cuda.services)).toEqual(['svc']);
    expect(cuda.services.svc.build).toEqual({ context: '..', dockerfile: 'docker/Dockerfile.cuda' });
    expect(cuda.services.svc.deploy.resources.reservations.devices[0]).toMatchObject({ driver: 'nvidia', capabilities: ['gpu'] });
  });

  it('stays within what podman-compose 1.0.3 reads: no profiles, no empty ${VAR:-} defaults', () => {
    const text = readFileSync(join(DOCKER, 'compose.yaml'), 'utf8');
    expect(text).not.toMatch(/\$\{\w+:?-\}/);
    for (const s of Object.values(compose.services) as Doc[]) expect(s.profiles).toBeUndefined();
  });

  it('Prometheus scrapes svc /metrics with the file compose mounts', () => {
    const job = (prom.scrape_configs as Doc[]).find((j) => j.job_name === 'svc')!;
    expect(job.metrics_path).toBe('/metrics');
    expect(job.static_configs[0].targets).toEqual([`svc:${SERVER_DEFAULT_PORT}`]);
    expect(compose.services.prometheus.volumes).toContain('./prometheus.yml:/etc/prometheus/prometheus.yml:ro');
  });
});
