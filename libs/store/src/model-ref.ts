import { InvalidRequestError } from '../../engine/src/core/errors';

/** A model name split the way Ollama stores it: manifests/<host>/<namespace>/<model>/<tag>. */
export interface ModelRef {
  host: string;
  namespace: string;
  model: string;
  tag: string;
}

export const DEFAULT_HOST = 'registry.ollama.ai';
export const DEFAULT_NAMESPACE = 'library';
export const DEFAULT_TAG = 'latest';
const MAX_PART = 128;
/** Letters, digits, '_', '-', '.'; not starting with '.' or '-' (so no '..', no hidden files). host may carry :port. */
const PART = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
const HOST = /^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[0-9]{1,5})?$/;

/**
 * Parses and validates `model`, `model:tag`, `ns/model:tag`, `host/ns/model:tag`.
 * Everything is checked here, before any path is built from the parts: a
 * hostile name (`../`, absolute paths, empty or over-long parts, odd characters)
 * never reaches the file system.
 */
export function parseModelRef(raw: string): ModelRef {
  const name = String(raw ?? '').trim();
  if (!name) throw new InvalidRequestError('a model name is required');
  if (name.length > 4 * MAX_PART + 8) throw new InvalidRequestError(`invalid model name "${clip(name)}": too long`);
  if (name.startsWith('/') || name.includes('\\') || name.includes('\0')) throw bad(name, 'not a relative name');
  // The tag follows the last ':' after the last '/', so host:port is not read as a tag.
  const slash = name.lastIndexOf('/');
  const colon = name.lastIndexOf(':');
  let path = name;
  let tag = DEFAULT_TAG;
  if (colon > slash) {
    path = name.slice(0, colon);
    tag = name.slice(colon + 1);
  }
  const parts = path.split('/');
  if (parts.length > 3) throw bad(name, 'at most host/namespace/model:tag');
  const model = parts[parts.length - 1];
  const namespace = parts.length >= 2 ? parts[parts.length - 2] : DEFAULT_NAMESPACE;
  const host = parts.length === 3 ? parts[0] : DEFAULT_HOST;
  for (const [what, v, re] of [['host', host, HOST], ['namespace', namespace, PART], ['model', model, PART], ['tag', tag, PART]] as const) {
    if (!v) throw bad(name, `empty ${what}`);
    if (v.length > MAX_PART) throw bad(name, `${what} longer than ${MAX_PART} characters`);
    if (!re.test(v) || v.includes('..')) throw bad(name, `${what} "${clip(v)}" has characters other than letters, digits, _ - .`);
  }
  return { host: host.toLowerCase(), namespace, model, tag };
}

/** The name as Ollama lists it: default host and namespace left out. */
export function displayName(r: ModelRef): string {
  if (r.host === DEFAULT_HOST && r.namespace === DEFAULT_NAMESPACE) return `${r.model}:${r.tag}`;
  if (r.host === DEFAULT_HOST) return `${r.namespace}/${r.model}:${r.tag}`;
  return `${r.host}/${r.namespace}/${r.model}:${r.tag}`;
}

/** Relative path of the manifest under <store>/manifests. */
export function manifestRelPath(r: ModelRef): string[] {
  return [r.host, r.namespace, r.model, r.tag];
}

/** `hf.co/<user>/<repo>:<quant>` (and huggingface.co) pull from hf.co as Ollama does. */
export function isHuggingFace(r: ModelRef): boolean {
  return r.host === 'hf.co' || r.host === 'huggingface.co';
}

/** Digests are `sha256:<64 hex>`; anything else is refused before it names a file. */
export function checkDigest(d: string): string {
  if (!/^sha256[:-][0-9a-f]{64}$/.test(d)) throw new InvalidRequestError(`invalid digest "${clip(d)}"`);
  return `sha256:${d.slice(7)}`;
}

function bad(name: string, why: string): InvalidRequestError {
  return new InvalidRequestError(`invalid model name "${clip(name)}": ${why}`);
}

function clip(s: string): string {
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}
