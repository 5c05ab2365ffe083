// Reading the deployment files as data: YAML documents, a small kustomize (resources +
// strategic-merge patches + images) and a Dockerfile instruction parser.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { load, loadAll, YAML11_SCHEMA } from 'js-yaml';

// YAML 1.1, as Kubernetes (go-yaml) and Compose read it: merge keys (<<), 0440 is octal.
const YAML_OPTS = { schema: YAML11_SCHEMA };

export const ROOT = resolve(__dirname, '..', '..');
export const K8S = join(ROOT, 'deploy', 'k8s');
export const DOCKER = join(ROOT, 'docker');

export type Doc = Record<string, any>;

export function readYamlDocs(file: string): Doc[] {
  return (loadAll(readFileSync(file, 'utf8'), YAML_OPTS) as unknown[]).filter((d): d is Doc => d !== null && typeof d === 'object');
}

export function readYaml(file: string): Doc {
  return load(readFileSync(file, 'utf8'), YAML_OPTS) as Doc;
}

export function yamlFilesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...yamlFilesUnder(p));
    else if (/\.ya?ml$/.test(e.name)) out.push(p);
  }
  return out.sort();
}

const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

/** Lists that kubectl's strategic merge patches merge by a key (the rest are replaced). */
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'name',
  ports: 'containerPort',
  tolerations: 'key',
};

export function strategicMerge(base: unknown, patch: unknown, field = ''): unknown {
  if (Array.isArray(patch)) {
    const key = MERGE_KEYS[field];
    if (!key || !Array.isArray(base)) return clone(patch);
    const out = clone(base) as Doc[];
    for (const item of patch as Doc[]) {
      const i = out.findIndex((b) => b[key] === item[key]);
      if (i >= 0) out[i] = strategicMerge(out[i], item) as Doc;
      else out.push(clone(item));
    }
    return out;
  }
  if (patch && typeof patch === 'object') {
    const out: Doc = base && typeof base === 'object' && !Array.isArray(base) ? clone(base as Doc) : {};
    for (const [k, v] of Object.entries(patch as Doc)) {
      if (v === null) delete out[k];
      else out[k] = strategicMerge(out[k], v, k);
    }
    return out;
  }
  return patch;
}

/** What `kubectl kustomize <dir>` would produce, for the features this repo uses. */
export function kustomize(dir: string): Doc[] {
  const kfile = join(dir, 'kustomization.yaml');
  if (!existsSync(kfile)) throw new Error(`${kfile} is missing`);
  const k = readYaml(kfile);
  let docs: Doc[] = [];
  for (const r of (k.resources ?? []) as string[]) {
    const p = resolve(dir, r);
    if (existsSync(join(p, 'kustomization.yaml'))) docs.push(...kustomize(p));
    else if (existsSync(p)) docs.push(...readYamlDocs(p));
    else throw new Error(`${kfile}: resource ${r} does not exist`);
  }
  for (const pt of (k.patches ?? []) as { path: string }[]) {
    const pfile = resolve(dir, pt.path);
    if (!existsSync(pfile)) throw new Error(`${kfile}: patch ${pt.path} does not exist`);
    for (const patch of readYamlDocs(pfile)) {
      const i = docs.findIndex((d) => d.kind === patch.kind && d.metadata?.name === patch.metadata?.name);
      if (i < 0) throw new Error(`${pfile}: patch target ${patch.kind}/${patch.metadata?.name} is not among the resources`);
      docs[i] = strategicMerge(docs[i], patch) as Doc;
    }
  }
  for (const img of (k.images ?? []) as { name: string; newName?: string; newTag?: string }[]) {
    docs = docs.map((d) => {
      const spec = d.spec?.template?.spec;
      if (!spec) return d;
      for (const c of [...(spec.containers ?? []), ...(spec.initContainers ?? [])] as Doc[]) {
        const [name, tag] = String(c.image).split(':');
        if (name === img.name) c.image = `${img.newName ?? name}:${img.newTag ?? tag ?? 'latest'}`;
      }
      return d;
    });
  }
  return docs;
}

export function find(docs: Doc[], kind: string, name?: string): Doc {
  const d = docs.find((x) => x.kind === kind && (name === undefined || x.metadata?.name === name));
  if (!d) throw new Error(`no ${kind}${name ? `/${name}` : ''} among ${docs.map((x) => `${x.kind}/${x.metadata?.name}`).join(', ')}`);
  return d;
}

export interface DockerInstruction {
  stage: number;
  stageName?: string;
  cmd: string;
  args: string;
}

/** Dockerfile instructions (continuations joined, comments dropped), with their stage. */
export function parseDockerfile(file: string): DockerInstruction[] {
  const lines = readFileSync(file, 'utf8').split('\n');
  const joined: string[] = [];
  let cur = '';
  for (const raw of lines) {
    const line = raw.replace(/\s+$/, '');
    if (!cur && /^\s*#/.test(line)) continue;
    if (cur && /^\s*#/.test(line)) continue;
    if (line.endsWith('\\')) {
      cur += line.slice(0, -1) + ' ';
      continue;
    }
    cur += line;
    if (cur.trim()) joined.push(cur.trim());
    cur = '';
  }
  if (cur.trim()) joined.push(cur.trim());
  const out: DockerInstruction[] = [];
  let stage = -1;
  let stageName: string | undefined;
  for (const l of joined) {
    const m = /^(\w+)\s+([\s\S]*)$/.exec(l);
    if (!m) continue;
    const cmd = m[1].toUpperCase();
    if (cmd === 'FROM') {
      stage++;
      stageName = /\sAS\s+(\S+)/i.exec(m[2])?.[1];
    }
    out.push({ stage, stageName, cmd, args: m[2].trim() });
  }
  return out;
}

/** The instructions of the last stage (what ships). */
export function finalStage(ins: DockerInstruction[]): DockerInstruction[] {
  const last = Math.max(...ins.map((i) => i.stage));
  return ins.filter((i) => i.stage === last);
}

/** ENV instructions of a stage as a map (both `ENV A=b C=d` and `ENV A b`). */
export function envOf(ins: DockerInstruction[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const i of ins.filter((x) => x.cmd === 'ENV')) {
    if (/^\w+\s+[^=]*$/.test(i.args) && !i.args.includes('=')) {
      const [k, ...v] = i.args.split(/\s+/);
      env[k] = v.join(' ');
      continue;
    }
    for (const m of i.args.matchAll(/(\w+)=("([^"]*)"|\S*)/g)) env[m[1]] = m[3] ?? m[2];
  }
  return env;
}

export const dockerfile = (name: string): string => join(DOCKER, name);
