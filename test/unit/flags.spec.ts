import { FlagError, parseFlags } from '../../apps/server/src/config/flags';
import { buildConfig, checkFlagFiles } from '../../apps/server/src/config/server-config';

describe('Go-style flags', () => {
  it('reads -flag value, -flag=value, --flag and bare booleans', () => {
    const { flags } = parseFlags(['-m', 'a.gguf', '--addr=0.0.0.0:9', '-studio', '-pull=false', '-conc', '3', '-cors', 'http://a', '-cors=http://b']);
    expect(flags).toMatchObject({ m: 'a.gguf', addr: '0.0.0.0:9', studio: true, pull: false, concurrency: 3, cors: ['http://a', 'http://b'] });
  });
  it('takes each -api-key whole (a key may hold commas) and refuses a blank one; $SVC_API_KEY holds several', () => {
    // "Zr8,k" was split: "Zr8" and "k" were accepted as keys, and -api-key "" left the server open.
    expect(parseFlags(['-api-key', 'Zr8,k', '-api-key=two']).flags['api-key']).toEqual(['Zr8,k', 'two']);
    expect(() => parseFlags(['-api-key', ''])).toThrow('flag -api-key wants a value, got an empty one');
    expect(() => parseFlags(['-api-key=  '])).toThrow(FlagError);
    expect(parseFlags([], { SVC_API_KEY: 'a, b' }).flags['api-key']).toEqual(['a', 'b']);
    expect(() => parseFlags([], { SVC_API_KEY: ' , ' })).toThrow('$SVC_API_KEY holds no value for -api-key');
  });
  it('refuses unknown flags and bad values', () => {
    expect(() => parseFlags(['-bogus'])).toThrow(FlagError);
    expect(() => parseFlags(['-concurrency', 'x'])).toThrow(/wants an integer/);
    expect(() => parseFlags(['-pull=maybe'])).toThrow(/true or false/);
    expect(() => parseFlags(['-m'])).toThrow(/needs a value/);
  });
  it('falls back to environment variables', () => {
    const { flags } = parseFlags([], { SVC_MODEL: 'x.gguf', SVC_CONCURRENCY: '2' });
    expect(flags).toMatchObject({ m: 'x.gguf', concurrency: 2 });
  });
  it('builds a typed config with defaults', () => {
    const c = buildConfig(parseFlags([]).flags);
    expect(c.host).toBe('127.0.0.1');
    expect(c.port).toBe(11435);
    expect(c.pull).toBe(true);
    expect(c.engine.concurrency).toBe(4);
    expect(() => buildConfig(parseFlags(['-addr', 'nope']).flags)).toThrow(/host:port/);
    // Files read at boot: a startup error naming the flag (it was a stack trace and exit 1).
    expect(() => checkFlagFiles(parseFlags(['-tls-cert', '/nonexistent.pem']).flags)).toThrow('flag -tls-cert: cannot read /nonexistent.pem (ENOENT)');
    expect(() => checkFlagFiles(parseFlags(['-lexicon', '/']).flags)).toThrow('flag -lexicon: cannot read / (a folder, not a file)');
    expect(() => checkFlagFiles(parseFlags(['-tls-cert=', '-lexicon', '/dev/stdin']).flags)).not.toThrow();
    expect(() => buildConfig(parseFlags(['-concurrency', '0']).flags)).toThrow(/between 1 and/);
    expect(buildConfig(parseFlags(['-addr', '[::1]:80']).flags)).toMatchObject({ host: '::1', port: 80 });
  });
  it('takes -huge-pages auto, on or off (also $SVC_HUGE_PAGES)', () => {
    expect(buildConfig(parseFlags([]).flags).engine.hugePages).toBe('auto');
    expect(buildConfig(parseFlags(['-huge-pages', 'off']).flags).engine.hugePages).toBe('off');
    expect(buildConfig(parseFlags([], { SVC_HUGE_PAGES: 'on' }).flags).engine.hugePages).toBe('on');
    expect(() => buildConfig(parseFlags(['-huge-pages', 'yes']).flags)).toThrow(/-huge-pages must be one of auto, on, off/);
  });
  it('takes -keep-alive as a keep_alive (also $SVC_KEEP_ALIVE), default 5m', () => {
    expect(buildConfig(parseFlags([]).flags).engine.keepAliveMs).toBe(300_000);
    expect(buildConfig(parseFlags(['-keep-alive', '1h30m']).flags).engine.keepAliveMs).toBe(5_400_000);
    expect(buildConfig(parseFlags(['-keep-alive', '-1']).flags).engine.keepAliveMs).toBe(Infinity);
    expect(buildConfig(parseFlags(['-keep-alive=0']).flags).engine.keepAliveMs).toBe(0);
    expect(buildConfig(parseFlags([], { SVC_KEEP_ALIVE: '90' }).flags).engine.keepAliveMs).toBe(90_000);
    expect(() => buildConfig(parseFlags(['-keep-alive', 'soon']).flags)).toThrow('flag -keep-alive: keep_alive: cannot read "soon" as a duration');
  });
  it('takes -backend-sampling auto, on or off (also $SVC_BACKEND_SAMPLING)', () => {
    expect(buildConfig(parseFlags([]).flags).engine.backendSampling).toBe('auto');
    expect(buildConfig(parseFlags(['-backend-sampling', 'on']).flags).engine.backendSampling).toBe('on');
    expect(buildConfig(parseFlags([], { SVC_BACKEND_SAMPLING: 'off' }).flags).engine.backendSampling).toBe('off');
    expect(() => buildConfig(parseFlags(['-backend-sampling', 'gpu']).flags)).toThrow(/-backend-sampling must be one of auto, on, off/);
  });
});
