/**
 * Just enough of a browser to run the studio page's own script, boot() included, in a node vm:
 * the elements its markup declares (by id, and the tab buttons), createElement, event listeners,
 * sessionStorage, and a fetch that sends the page's relative URLs to a real server with the
 * Origin a browser would add. No DOM library is installed; the page needs only these.
 */
import { runInNewContext } from 'node:vm';

export class FakeElement {
  private own = '';
  children: FakeElement[] = [];
  className = '';
  hidden = false;
  disabled = false;
  open = false;
  value = '';
  scrollTop = 0;
  scrollHeight = 0;
  dataset: Record<string, string> = {};
  attributes: Record<string, string> = {};
  private listeners: Record<string, Array<(ev: unknown) => unknown>> = {};

  constructor(readonly tag: string) {}

  get textContent(): string {
    return this.own + this.children.map((c) => c.textContent).join('');
  }
  set textContent(v: string) {
    this.own = String(v);
    this.children = [];
  }
  appendChild(c: FakeElement): FakeElement {
    this.children.push(c);
    return c;
  }
  setAttribute(k: string, v: string): void {
    this.attributes[k] = v;
  }
  addEventListener(type: string, fn: (ev: unknown) => unknown): void {
    (this.listeners[type] ??= []).push(fn);
  }
  /** Runs the listeners as a browser would (their promises are awaited here, so a test can wait for the handler). */
  async fire(type: string, ev: Record<string, unknown> = {}): Promise<void> {
    for (const fn of this.listeners[type] ?? []) await fn({ preventDefault() {}, ...ev });
  }
  click(): Promise<void> {
    return this.fire('click');
  }
  /** Descendants with this class, depth first. */
  find(cls: string): FakeElement[] {
    return this.children.flatMap((c) => [...(c.className.split(' ').includes(cls) ? [c] : []), ...c.find(cls)]);
  }
}

export interface StudioBrowser {
  el(id: string): FakeElement;
  storage: Map<string, string>;
  requests: Array<{ path: string; method: string; headers: Record<string, string> }>;
  /** Waits until `ok()` holds (what the page does without being awaited: its boot-time connect, a key change). */
  until(ok: () => boolean, ms?: number): Promise<void>;
}

/** Boots the page's script from `html` against `baseUrl`, as a browser at `origin` would. */
export function bootStudio(html: string, baseUrl: string, origin: string, storage = new Map<string, string>()): StudioBrowser {
  const byId = new Map<string, FakeElement>();
  for (const m of html.matchAll(/<([a-z0-9]+)\b([^>]*)\sid="([^"]+)"/g)) {
    const e = new FakeElement(m[1]);
    e.hidden = /\shidden\b/.test(m[2]);
    const value = /\svalue="([^"]*)"/.exec(m[2]);
    if (value) e.value = value[1];
    byId.set(m[3], e);
  }
  const tabs: FakeElement[] = [];
  for (const m of html.matchAll(/<button role="tab" data-tab="([^"]+)"[^>]*?(?:id="([^"]+)")?[^>]*>/g)) {
    const b = m[2] ? byId.get(m[2])! : new FakeElement('button');
    b.dataset.tab = m[1];
    tabs.push(b);
  }
  const requests: StudioBrowser['requests'] = [];
  const document = {
    getElementById: (id: string) => byId.get(id) ?? null,
    createElement: (tag: string) => new FakeElement(tag),
    querySelectorAll: (sel: string) => {
      if (sel !== '#tabs button') throw new Error(`the fake document knows no selector ${sel}`);
      return tabs;
    },
  };
  const sessionStorage = {
    getItem: (k: string) => storage.get(k) ?? null,
    setItem: (k: string, v: string) => void storage.set(k, String(v)),
    removeItem: (k: string) => void storage.delete(k),
  };
  const pageFetch = (path: string, init: RequestInit = {}) => {
    if (!path.startsWith('/')) throw new Error(`the page fetched ${path}, not a path on its own origin`);
    const method = init.method ?? 'GET';
    const headers = { ...(init.headers as Record<string, string>) };
    requests.push({ path, method, headers });
    // Browsers send Origin on same-origin POSTs (not on same-origin GETs).
    if (method !== 'GET') headers.origin = origin;
    return fetch(baseUrl + path, { ...init, headers });
  };
  const script = html.slice(html.indexOf('<script>') + 8, html.indexOf('</script>'));
  runInNewContext(script, { document, sessionStorage, fetch: pageFetch, AbortController, TextDecoder, console });
  return {
    el: (id) => {
      const e = byId.get(id);
      if (!e) throw new Error(`no element #${id}`);
      return e;
    },
    storage,
    requests,
    until: async (ok, ms = 10_000) => {
      const end = Date.now() + ms;
      while (!ok()) {
        if (Date.now() > end) throw new Error('the page did not get there in time');
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
}
