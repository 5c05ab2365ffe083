import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildAuthConfig } from '../../libs/auth/src/auth-config';
import { pathOf } from '../../libs/auth/src/auth.service';
import { parseCallers } from '../../libs/auth/src/callers-file';
import { nameFromCertificate } from '../../libs/auth/src/client-cert';
import { ownerKey } from '../../libs/http/src/identity';
import { constantTimeEqual, keyDigest, KeyRing, storedKeyDigest } from '../../libs/auth/src/keys';
import { clearanceFailure, DEFAULT_LEVELS, MarkingSyntaxError, parseLevels, parseMarking } from '../../libs/auth/src/marking';
import { claimList, looksLikeJwt } from '../../libs/auth/src/oidc';
import {
  isServerOrigin,
  keylessHostRefusal,
  localSurface,
  localSurfaceRefusal,
  mutationRefusal,
  normalizeOrigin,
  originPermitted,
  parseCorsOrigins,
  RequestView,
} from '../../libs/auth/src/origin';
import { FlagError, parseFlags } from '../../apps/server/src/config/flags';

const L = DEFAULT_LEVELS;

describe('marking parser', () => {
  it('parses LEVEL and LEVEL//COMP/COMP, case-insensitively, to a canonical form', () => {
    expect(parseMarking('SECRET', L)).toEqual({ level: 'SECRET', rank: 2, compartments: [], canonical: 'SECRET' });
    expect(parseMarking(' top   secret//hcs/Alpha ', L)).toEqual({ level: 'TOP SECRET', rank: 3, compartments: ['ALPHA', 'HCS'], canonical: 'TOP SECRET//ALPHA/HCS' });
    expect(parseMarking('CONFIDENTIAL//A/A', L).compartments).toEqual(['A']);
  });

  it.each([
    ['', /empty marking/],
    ['SECRETISH', /unknown level "SECRETISH"; levels are UNCLASSIFIED, CONFIDENTIAL, SECRET, TOP SECRET/],
    ['SECRET//', /empty compartment/],
    ['SECRET//A//B', /more than one/],
    ['SECRET//A/', /empty compartment/],
    ['SECRET//A B', /is not letters/],
    ['//A', /unknown level/],
  ])('refuses %j', (value, why) => {
    expect(() => parseMarking(value, L)).toThrow(MarkingSyntaxError);
    expect(() => parseMarking(value, L)).toThrow(why);
  });

  it('reads custom level lists', () => {
    expect(parseLevels('PUBLIC, INTERNAL ,RESTRICTED')).toEqual(['PUBLIC', 'INTERNAL', 'RESTRICTED']);
    expect(() => parseLevels('A,a')).toThrow(/twice/);
    expect(() => parseLevels(' , ')).toThrow(/no classification levels/);
    expect(parseMarking('internal', ['PUBLIC', 'INTERNAL']).rank).toBe(1);
  });

  it('gives the spec 403 messages', () => {
    const alice = { name: 'alice', clearance: 'SECRET', compartments: ['HCS'] };
    expect(clearanceFailure(alice, parseMarking('SECRET//HCS', L), L)).toBeNull();
    expect(clearanceFailure(alice, parseMarking('CONFIDENTIAL', L), L)).toBeNull();
    expect(clearanceFailure(alice, parseMarking('TOP SECRET', L), L)).toBe('alice is cleared to SECRET and this request is TOP SECRET');
    expect(clearanceFailure(alice, parseMarking('SECRET//HCS/SI', L), L)).toBe('alice is not read into SI');
    expect(clearanceFailure({ name: 'bob', compartments: [] }, parseMarking('UNCLASSIFIED', L), L)).toBe('bob holds no clearance on this server');
  });
});

describe('constant-time keys', () => {
  it('matches plain keys and sha256: hashes, every entry compared', () => {
    const ring = new KeyRing<string>();
    ring.add(storedKeyDigest('plain-key'), 'a');
    ring.add(storedKeyDigest(`sha256:${createHash('sha256').update('hashed-key').digest('hex')}`), 'b');
    ring.add(storedKeyDigest('plain-key'), 'dup');
    expect(ring.match('plain-key')).toBe('a');
    expect(ring.match('hashed-key')).toBe('b');
    expect(ring.match('nope')).toBeUndefined();
    expect(ring.match('')).toBeUndefined();
    expect(ring.size).toBe(3);
  });

  it('compares digests of equal length whatever the input length', () => {
    expect(keyDigest('x').length).toBe(32);
    expect(keyDigest('x'.repeat(10_000)).length).toBe(32);
    expect(constantTimeEqual('abc', 'abc')).toBe(true);
    expect(constantTimeEqual('abc', 'abcd')).toBe(false);
    expect(() => new KeyRing().add(Buffer.alloc(16), 'x')).toThrow();
  });
});

const view = (over: Partial<RequestView> & { headers?: RequestView['headers'] }): RequestView => ({
  method: 'POST',
  path: '/v1/chat/completions',
  scheme: 'http',
  localAddress: '127.0.0.1',
  localPort: 11435,
  remoteAddress: '127.0.0.1',
  listenHost: '127.0.0.1',
  ...over,
  headers: { host: '127.0.0.1:11435', ...(over.headers ?? {}) },
});

describe('origin matcher', () => {
  it('normalizes origins', () => {
    expect(normalizeOrigin('HTTPS://App.Example:443')).toBe('https://app.example');
    expect(normalizeOrigin('http://a.example:8080')).toBe('http://a.example:8080');
    expect(normalizeOrigin('https://a.example/path')).toBeNull();
    expect(normalizeOrigin('null')).toBeNull();
    expect(normalizeOrigin('ftp://a')).toBeNull();
    expect(parseCorsOrigins(['https://a.example/', 'http://b:1'])).toEqual(['https://a.example', 'http://b:1']);
    expect(() => parseCorsOrigins(['not an origin'])).toThrow(/-cors wants an origin/);
  });

  it('permits only listed origins (or any with *)', () => {
    expect(originPermitted('https://APP.example', ['https://app.example'])).toBe(true);
    expect(originPermitted('https://app.example:8443', ['https://app.example'])).toBe(false);
    expect(originPermitted('http://app.example', ['https://app.example'])).toBe(false);
    expect(originPermitted('null', ['https://app.example'])).toBe(false);
    expect(originPermitted('https://x.example', ['*'])).toBe(true);
    expect(originPermitted('null', ['*'])).toBe(false);
  });

  it("knows the server's own origin, and not a rebound DNS name", () => {
    const v = view({});
    expect(isServerOrigin('http://127.0.0.1:11435', v)).toBe(true);
    expect(isServerOrigin('http://localhost:11435', v)).toBe(true);
    expect(isServerOrigin('http://studio.localhost:11435', v)).toBe(true);
    expect(isServerOrigin('http://[::1]:11435', v)).toBe(true);
    expect(isServerOrigin('http://localhost:3000', v)).toBe(false);
    expect(isServerOrigin('https://localhost:11435', v)).toBe(false);
    expect(isServerOrigin('http://evil.example:11435', v)).toBe(false);
    expect(isServerOrigin('http://192.168.1.5:11435', view({ localAddress: '::ffff:192.168.1.5', listenHost: '0.0.0.0' }))).toBe(true);
  });

  it('refuses cross-origin mutations with the spec messages', () => {
    const cors = ['https://app.example'];
    expect(mutationRefusal(view({ headers: { origin: 'https://evil.example' } }), cors)).toEqual({
      status: 403,
      message: 'origin not permitted; a web page at https://evil.example may not call this server',
    });
    expect(mutationRefusal(view({ path: '/api/pull', headers: { origin: 'https://evil.example' } }), cors)).toEqual({
      status: 403,
      message: "a web page at https://evil.example may not change this server's model store",
    });
    for (const path of ['/api/copy', '/api/delete']) {
      expect(mutationRefusal(view({ path, method: 'DELETE', headers: { origin: 'null' } }), [])?.message).toBe("a web page at null may not change this server's model store");
    }
    expect(mutationRefusal(view({ headers: { origin: 'https://app.example' } }), cors)).toBeNull();
    expect(mutationRefusal(view({ headers: { origin: 'http://localhost:11435' } }), [])).toBeNull();
    expect(mutationRefusal(view({ method: 'GET', headers: { origin: 'https://evil.example' } }), cors)).toBeNull();
    expect(mutationRefusal(view({}), cors)).toBeNull();
    expect(mutationRefusal(view({ method: 'PUT', headers: { origin: 'https://evil.example' } }), cors)?.status).toBe(403);
  });

  it('a keyless server refuses a loopback request whose Host names another machine (DNS rebinding)', () => {
    const at = (host: string | undefined, localAddress = '127.0.0.1') => keylessHostRefusal(view({ method: 'GET', path: '/v1/contexts', localAddress, headers: { host } }), ['https://app.example'], 'mybox');
    // Names no attacker can own in public DNS: loopback, this machine, -cors hosts, IP literals, single labels, local-only suffixes.
    for (const ok of ['localhost:11435', '127.0.0.1:11435', '[::1]:11435', 'svc.localhost', 'mybox:11435', 'MyBox.local', 'app.example:11435', '0.0.0.0:11435', '192.168.1.5', 'x', 'svc:11435', 'printer.local', 'db.internal']) {
      expect([ok, at(ok)]).toEqual([ok, null]);
    }
    expect(at('rebound.example:11435')).toEqual({ status: 403, message: 'the Host header "rebound.example:11435" does not name this server' });
    expect(at('evil.co.uk')?.status).toBe(403);
    expect(at('')?.status).toBe(403);
    // Not over loopback (a container port, a cluster service name), or no Host at all (HTTP/1.0): not this rule's.
    expect(at('svc.default.svc.cluster.local:11435', '10.1.2.3')).toBeNull();
    expect(at(undefined)).toBeNull();
  });

  it('guards studio and MCP against rebinding and other machines', () => {
    expect(localSurface('/studio')).toBe('studio');
    expect(localSurface('/studio/x')).toBe('studio');
    expect(localSurface('/mcp')).toBe('mcp');
    expect(localSurface('/mcpx')).toBeNull();
    const studio = (o: Partial<RequestView> & { headers?: RequestView['headers'] }) => localSurfaceRefusal(view({ method: 'GET', path: '/studio', ...o }), 'studio');
    const mcp = (o: Partial<RequestView> & { headers?: RequestView['headers'] }) => localSurfaceRefusal(view({ path: '/mcp', ...o }), 'mcp');
    expect(studio({ headers: { host: 'localhost:11435' } })).toBeNull();
    expect(studio({ headers: { host: 'studio.localhost:11435', origin: 'http://studio.localhost:11435' } })).toBeNull();
    const only = { status: 421, message: 'Studio answers this machine only' };
    expect(studio({ remoteAddress: '10.0.0.9', headers: { host: 'localhost:11435' } })).toEqual(only);
    expect(studio({ headers: { host: 'evil.example:11435' } })).toEqual(only);
    expect(studio({ localAddress: '10.0.0.2', listenHost: '0.0.0.0', headers: { host: '10.0.0.2:11435' } })).toEqual(only);
    expect(studio({ headers: { host: 'localhost:11435', origin: 'https://app.example' } })).toEqual({
      status: 403,
      message: 'origin not permitted; a web page at https://app.example may not call this server',
    });
    expect(mcp({})).toBeNull();
    expect(mcp({ localAddress: '10.0.0.2', listenHost: '0.0.0.0', remoteAddress: '10.0.0.7', headers: { host: '10.0.0.2:11435' } })).toBeNull();
    // MCP's Host is the keyless rule's (keylessHostRefusal), as every route's: a keyed client may use any name.
    expect(mcp({ headers: { host: 'svc.cluster.example:11435' } })).toBeNull();
    expect(mcp({ headers: { origin: 'http://evil.example:11435' } })?.status).toBe(403);
  });
});

describe('callers file and flags', () => {
  it('parses callers, hashing plain keys, validating clearances', () => {
    const hex = createHash('sha256').update('k').digest('hex');
    const [a, b] = parseCallers({ callers: [{ name: 'alice', keys: [`sha256:${hex}`], clearance: 'secret', compartments: ['hcs'], labels: ['x'] }, { name: 'bob', keys: ['plain'] }] }, L);
    expect(a).toMatchObject({ name: 'alice', clearance: 'SECRET', compartments: ['HCS'], labels: ['x'] });
    expect(a.digests[0].equals(keyDigest('k'))).toBe(true);
    expect(b.digests[0].equals(keyDigest('plain'))).toBe(true);
    expect(() => parseCallers([{ name: 'x', clearance: 'COSMIC' }], L)).toThrow(/clearance "COSMIC" is not one of/);
    expect(() => parseCallers([{ name: 'x' }, { name: 'x' }], L)).toThrow(/used twice/);
    expect(() => parseCallers([{ keys: [] }], L)).toThrow(/name must be/);
    expect(() => parseCallers({}, L)).toThrow(/expected a list/);
    // A misspelt field left the caller with no clearance, silently.
    expect(() => parseCallers([{ name: 'x', compartments: ['bad comp!'] }], L)).toThrow('callers: callers[0].compartments: "bad comp!" is not letters, digits, underscore, hyphen or dot');
    expect(() => parseCallers([{ name: 'x', clearence: 'SECRET' }], L)).toThrow('callers: callers[0]: unknown field "clearence" (a caller has name, keys, clearance, compartments, labels)');
  });

  it('refuses a key that names two callers (or a caller and -api-key): the first listed won, silently', () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-callers-'));
    const file = join(dir, 'callers.json');
    writeFileSync(file, JSON.stringify([{ name: 'alice', keys: ['same'] }, { name: 'bob', keys: ['same'] }]));
    expect(() => cfg(['-callers', file])).toThrow('flag -callers: a key of bob is also a key of alice: each key must name one caller');
    writeFileSync(file, JSON.stringify([{ name: 'alice', keys: ['k1', 'k1'] }]));
    expect(() => cfg(['-callers', file, '-api-key', 'k1'])).toThrow('flag -callers: a key of alice is also a key of -api-key: each key must name one caller');
    expect(cfg(['-callers', file]).callers).toHaveLength(1);
  });

  it('a malformed YAML callers file is named by line and column, never by its lines (they hold keys)', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'svc-callers-')), 'callers.yaml');
    writeFileSync(file, 'callers:\n  - name: alice\n    keys: ["sk-alice-SUPERSECRET"]\n   clearance: SECRET\n');
    expect(() => cfg(['-callers', file])).toThrow(`flag -callers: callers file ${file}: bad indentation of a sequence entry at line 4, column 4`);
    expect(() => cfg(['-callers', file])).not.toThrow(/SUPERSECRET/);
  });

  const cfg = (args: string[]) => buildAuthConfig(parseFlags(args).flags);

  it('reads the auth flags', () => {
    const c = cfg(['-classification', '-cors', 'https://a.example', '-oidc-issuer', 'http://127.0.0.1:9/', '-oidc-audience', 'svc']);
    expect(c.classification).toEqual({ enabled: true, required: true, levels: L });
    expect(c.cors).toEqual(['https://a.example']);
    expect(c.oidc).toMatchObject({ issuer: 'http://127.0.0.1:9/', audience: 'svc', nameClaim: 'sub' });
    expect(c.refuseLegacySnapshots).toBe(true);
    expect(cfg(['-classification', '-require-classification=false']).classification.required).toBe(false);
    expect(cfg([]).classification.enabled).toBe(false);
    expect(cfg(['-classification-levels', 'LOW, HIGH', '-classification']).classification.levels).toEqual(['LOW', 'HIGH']);
    expect(() => cfg(['-oidc-audience', 'x'])).toThrow(/needs -oidc-issuer/);
    expect(() => cfg(['-oidc-issuer', 'not a url'])).toThrow(/wants an http\(s\) URL/);
    expect(() => cfg(['-tls-client-ca', 'ca.pem'])).toThrow(/needs -tls-cert/);
  });

  it('enterprise: markings required, no studio exec, TLS unless -insecure', () => {
    expect(() => cfg(['-profile', 'enterprise'])).toThrow(FlagError);
    expect(() => cfg(['-profile', 'enterprise'])).toThrow(/expects TLS/);
    const c = cfg(['-profile', 'enterprise', '-insecure']);
    expect(c.classification).toMatchObject({ enabled: true, required: true });
    expect(c.refuseLegacySnapshots).toBe(true);
    expect(cfg(['-profile', 'enterprise', '-insecure', '-allow-legacy-snapshots']).refuseLegacySnapshots).toBe(false);
    expect(() => cfg(['-profile', 'enterprise', '-insecure', '-studio-exec'])).toThrow(/does not allow -studio-exec/);
    expect(() => cfg(['-profile', 'enterprise', '-insecure', '-require-classification=false'])).toThrow(/requires classification markings/);
  });
});

describe('callers, tokens and certificates', () => {
  it('ownerKey separates callers and markings, whatever a name holds; the anonymous unmarked owner stays the default', () => {
    const secret = parseMarking('SECRET', L).canonical;
    expect(parseMarking('secret', L).canonical).toBe(secret);
    expect(ownerKey({ owner: 'alice', marking: secret })).not.toBe(ownerKey({ owner: 'bob', marking: secret }));
    expect(ownerKey({ owner: 'alice', marking: secret })).not.toBe(ownerKey({ owner: 'alice', marking: parseMarking('SECRET//A', L).canonical }));
    expect(ownerKey({ owner: 'alice', marking: '' })).not.toBe(ownerKey({ owner: 'alice', marking: secret }));
    // A caller may be named like another caller's key at a marking.
    expect(ownerKey({ owner: 'x//SECRET', marking: '' })).not.toBe(ownerKey({ owner: 'x', marking: 'SECRET' }));
    expect(ownerKey({ owner: 'x', marking: 'SECRET//A' })).not.toBe(ownerKey({ owner: 'x//SECRET', marking: 'A' }));
    expect(ownerKey({ owner: '', marking: '' })).toBe('');
    expect(ownerKey({ owner: '', marking: secret })).not.toBe('');
  });

  it('reads a path as the router does: escapes decoded, reserved ones kept, query and fragment dropped', () => {
    expect(pathOf({ url: '/v1/%6dodels?x=%2F' })).toBe('/v1/models');
    expect(pathOf({ url: '/%6Dcp#frag' })).toBe('/mcp');
    expect(pathOf({ url: '/api%2Fpull' })).toBe('/api%2Fpull');
    expect(pathOf({ url: '/bad%E0%A4%A' })).toBe('/bad%E0%A4%A');
    expect(pathOf({ url: '/healthz' })).toBe('/healthz');
  });

  it('names a certificate by CN, else the first DNS or email SAN', () => {
    expect(nameFromCertificate({ subject: { CN: 'alice' }, subjectaltname: 'DNS:x' } as never)).toBe('alice');
    expect(nameFromCertificate({ subject: { O: 'org' }, subjectaltname: 'IP Address:1.2.3.4, email:bob@example.org, DNS:b' } as never)).toBe('bob@example.org');
    expect(nameFromCertificate({ subject: {}, subjectaltname: 'DNS:svc-client.example' } as never)).toBe('svc-client.example');
    expect(nameFromCertificate({} as never)).toBeUndefined();
  });

  it('recognizes JWTs and list claims', () => {
    expect(looksLikeJwt('eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln')).toBe(true);
    expect(looksLikeJwt('sk-plain-key')).toBe(false);
    expect(claimList(['a', 'b', 3])).toEqual(['a', 'b']);
    expect(claimList('a b,c/d')).toEqual(['a', 'b', 'c', 'd']);
    expect(claimList(undefined)).toEqual([]);
  });
});
