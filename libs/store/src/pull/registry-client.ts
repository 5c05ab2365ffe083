import { EngineError } from '../../../engine/src/core/errors';
import { Manifest, MEDIA_MANIFEST } from '../manifest-store';
import { isHuggingFace, ModelRef } from '../model-ref';

/** A pull failure with the status it answers (a registry's 404 stays 404; its outages are 502). */
export class PullError extends EngineError {
  constructor(message: string, status = 500) {
    super(message, status);
  }
}

/**
 * Ollama's registry protocol (Docker registry v2): manifests and blobs under
 * /v2/<namespace>/<model>/, a Bearer token fetched when the registry answers
 * 401 with a `WWW-Authenticate: Bearer realm=...,service=...,scope=...`
 * challenge, and blob redirects to a CDN followed (fetch drops the
 * Authorization header when the redirect leaves the registry's origin).
 */
export class RegistryClient {
  private token?: string;

  constructor(
    readonly ref: ModelRef,
    private readonly opts: { insecure?: boolean; env?: NodeJS.ProcessEnv } = {},
  ) {}

  /** https://<host>, or http:// with `insecure` (as the local runner), for registries named in SVC_INSECURE_REGISTRIES, or when SVC_REGISTRY_SCHEME=http (tests). */
  get baseUrl(): string {
    const env = this.opts.env ?? process.env;
    const insecure = (env.SVC_INSECURE_REGISTRIES ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
    const scheme = this.opts.insecure || env.SVC_REGISTRY_SCHEME === 'http' || insecure.includes(this.ref.host) ? 'http' : 'https';
    const host = isHuggingFace(this.ref) ? 'hf.co' : this.ref.host;
    return `${scheme}://${host}`;
  }

  private get repo(): string {
    return `${this.ref.namespace}/${this.ref.model}`;
  }

  async manifest(signal?: AbortSignal): Promise<Manifest> {
    const url = `${this.baseUrl}/v2/${this.repo}/manifests/${this.ref.tag}`;
    const r = await this.fetch(url, { headers: { accept: MEDIA_MANIFEST }, signal });
    if (r.status === 404) throw new PullError(`pull model manifest: file does not exist (${this.repo}:${this.ref.tag} on ${this.ref.host})`, 404);
    if (!r.ok) throw new PullError(`pull model manifest: ${this.ref.host} answered ${r.status}: ${(await readCapped(r, 4096, 'the error')).slice(0, 200)}`, 502);
    const text = await readCapped(r, MAX_REGISTRY_JSON, 'the manifest');
    let m: Manifest;
    try {
      m = JSON.parse(text) as Manifest;
    } catch {
      throw new PullError(`pull model manifest: ${this.ref.host} sent something that is not JSON`, 502);
    }
    checkManifest(m);
    return m;
  }

  blobUrl(digest: string): string {
    return `${this.baseUrl}/v2/${this.repo}/blobs/${digest}`;
  }

  /** A request with the registry's token; on a Bearer challenge, fetch the token and retry once. */
  async fetch(url: string, init: RequestInit = {}): Promise<Response> {
    const withAuth = (): RequestInit => ({ ...init, redirect: 'follow', headers: { ...(init.headers as Record<string, string>), ...(this.token ? { authorization: `Bearer ${this.token}` } : {}) } });
    let r = await reach(url, withAuth());
    if (r.status !== 401) return r;
    const challenge = parseChallenge(r.headers.get('www-authenticate') ?? '');
    await r.body?.cancel();
    // The registry's refusals are 502s: a 401 from svc itself means svc's own key (spec).
    if (!challenge) throw new PullError(`${this.ref.host} refused the request (401) without a Bearer challenge`, 502);
    this.token = await this.fetchToken(challenge, init.signal ?? undefined);
    r = await reach(url, withAuth());
    if (r.status === 401) throw new PullError(`${this.ref.host} refused the token (401)`, 502);
    return r;
  }

  private async fetchToken(c: Challenge, signal?: AbortSignal): Promise<string> {
    const u = new URL(c.realm);
    if (c.service) u.searchParams.set('service', c.service);
    if (c.scope) u.searchParams.set('scope', c.scope);
    const r = await reach(u.href, { signal });
    if (!r.ok) throw new PullError(`token request to ${u.host} answered ${r.status}`, 502);
    let body: { token?: unknown; access_token?: unknown } | undefined;
    try {
      body = JSON.parse(await readCapped(r, MAX_REGISTRY_JSON, 'the token answer'));
    } catch (err) {
      if (err instanceof PullError) throw err;
    }
    const t = body?.token ?? body?.access_token;
    if (typeof t !== 'string' || !t) throw new PullError(`token request to ${u.host} returned no token`, 502);
    return t;
  }
}

/** Manifests and token answers are a few KiB; a registry sending more is faulty (it was read whole into memory). */
export const MAX_REGISTRY_JSON = 4 * 1024 * 1024;

/** A response body as text, refused (502) past `max` bytes without reading on. */
export async function readCapped(r: Response, max: number, what: string): Promise<string> {
  if (!r.body) return '';
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
    n += chunk.length;
    if (n > max) {
      await r.body.cancel().catch(() => undefined);
      throw new PullError(`${what} from ${new URL(r.url || 'http://registry').host} is larger than ${max} bytes`, 502);
    }
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** fetch, with an unreachable host (refused, DNS, TLS) as the 502 it is rather than a TypeError. */
export async function reach(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new PullError(`cannot reach ${new URL(url).host}: ${cause?.code ?? cause?.message ?? (err as Error).message}`, 502);
  }
}

/**
 * What the pull relies on in a manifest the registry sent: layers (and the config) with
 * sha256 digests and sizes that are whole byte counts. A size of "abc" made the download
 * ask for no range and append the blob again and again.
 */
export function checkManifest(m: Manifest): void {
  if (!m || typeof m !== 'object' || !Array.isArray(m.layers)) throw new PullError('pull model manifest: the registry sent no layers', 502);
  const layers: unknown[] = [...(m.config !== undefined ? [m.config] : []), ...m.layers];
  for (const l of layers) {
    const layer = l as { digest?: unknown; size?: unknown } | null;
    if (!layer || typeof layer !== 'object' || typeof layer.digest !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(layer.digest)) {
      throw new PullError(`pull model manifest: the registry sent a layer without a sha256 digest: ${JSON.stringify(l)?.slice(0, 120)}`, 502);
    }
    if (typeof layer.size !== 'number' || !Number.isSafeInteger(layer.size) || layer.size < 0) {
      throw new PullError(`pull model manifest: the registry gives ${layer.digest.slice(0, 19)} a size of ${JSON.stringify(layer.size)}`, 502);
    }
  }
}

interface Challenge {
  realm: string;
  service?: string;
  scope?: string;
}

/** `Bearer realm="https://x/token",service="x",scope="repository:a/b:pull"` → its parts. */
export function parseChallenge(h: string): Challenge | undefined {
  const m = /^\s*Bearer\s+(.*)$/i.exec(h);
  if (!m) return undefined;
  const params: Record<string, string> = {};
  for (const p of m[1].matchAll(/([A-Za-z]+)=(?:"([^"]*)"|([^,]*))/g)) params[p[1].toLowerCase()] = p[2] ?? p[3];
  if (!params.realm) return undefined;
  try {
    const u = new URL(params.realm);
    if (u.protocol !== 'https:' && u.protocol !== 'http:') return undefined;
  } catch {
    return undefined;
  }
  return { realm: params.realm, service: params.service, scope: params.scope };
}
