/**
 * The studio's command route below HTTP: the body check (execRequest, checkExecAllowed) and the
 * runner (runCommand) on the real /bin/sh. test/e2e/studio.e2e-spec.ts repeats the important
 * cases through the real server.
 */
import { HttpException, Logger } from '@nestjs/common';
import { mkdtempSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvalidRequestError } from '../../libs/engine/src/core/errors';
import { commandEnv, runCommand } from '../../libs/studio/src/exec/command-runner';
import { StudioModule } from '../../libs/studio/src/studio.module';
import { checkExecAllowed, DEFAULT_TIMEOUT_MS, EXEC_OFF_MESSAGE, execRequest, ExecRequest, MAX_COMMAND_CHARS } from '../../libs/studio/src/exec/exec-request';
import { eventuallyGone, gone } from '../e2e/helpers/processes';

jest.setTimeout(20_000);

const base = realpathSync(tmpdir());
const req = (command: string, o: Partial<ExecRequest> = {}): ExecRequest => ({ command, cwd: base, timeoutMs: 10_000, ...o });


describe('execRequest: the body of POST /studio/exec', () => {
  const bad = (body: unknown, message: string | RegExp) => {
    let err: unknown;
    try {
      execRequest(body, base);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidRequestError);
    expect((err as Error).message).toMatch(message);
  };

  it('fills in the defaults: the base folder, 30 s', () => {
    expect(execRequest({ command: 'ls' }, base)).toEqual({ command: 'ls', cwd: base, timeoutMs: DEFAULT_TIMEOUT_MS });
    expect(execRequest({ command: 'ls', cwd: '', timeout_ms: null }, base)).toEqual({ command: 'ls', cwd: base, timeoutMs: DEFAULT_TIMEOUT_MS });
  });

  it('resolves a relative cwd against the base folder and takes an absolute one as it is', () => {
    const dir = mkdtempSync(join(base, 'studio-cwd-'));
    expect(execRequest({ command: 'ls', cwd: dir.slice(base.length + 1) }, base).cwd).toBe(dir);
    expect(execRequest({ command: 'ls', cwd: dir, timeout_ms: 300_000 }, '/').cwd).toBe(dir);
  });

  it('answers 400 for what cannot run, naming the field', () => {
    bad(undefined, 'command is required');
    bad([], 'the body must be a JSON object');
    bad('ls', 'the body must be a JSON object');
    bad(null, 'the body must be a JSON object');
    bad({}, 'command is required');
    bad({ command: 5 }, 'command must be a string');
    bad({ command: ['ls'] }, 'command must be a string');
    bad({ command: '  ' }, 'command is empty');
    bad({ command: 'x'.repeat(MAX_COMMAND_CHARS + 1) }, `at most ${MAX_COMMAND_CHARS}`);
    bad({ command: 'echo a\0b' }, 'command holds a NUL character');
    bad({ command: 'ls', cwd: 7 }, 'cwd must be a string');
    bad({ command: 'ls', cwd: '/no/such/folder' }, 'cwd "/no/such/folder" is not a directory on this machine');
    bad({ command: 'ls', cwd: '/etc/hostname' }, 'is not a directory');
    bad({ command: 'ls', timeout_ms: '300' }, 'timeout_ms must be an integer');
    bad({ command: 'ls', timeout_ms: 1.5 }, 'timeout_ms must be an integer');
    bad({ command: 'ls', timeout_ms: 0 }, 'timeout_ms must be between 1 and 300000, got 0');
    bad({ command: 'ls', timeout_ms: 300_001 }, 'between 1 and 300000');
  });

  it('runs nothing without -studio-exec (403, the spec message) or without a JSON body (415)', () => {
    const status = (f: () => void) => {
      try {
        f();
        return 0;
      } catch (e) {
        return [(e as HttpException).getStatus(), (e as HttpException).message];
      }
    };
    expect(status(() => checkExecAllowed(false, 'application/json'))).toEqual([403, EXEC_OFF_MESSAGE]);
    expect(EXEC_OFF_MESSAGE).toBe('the server serves the studio without -studio-exec');
    expect(status(() => checkExecAllowed(true, 'text/plain'))).toEqual([415, 'send the command as Content-Type: application/json']);
    expect(status(() => checkExecAllowed(true, undefined))).toEqual([415, expect.any(String)]);
    expect(status(() => checkExecAllowed(true, 'application/x-www-form-urlencoded'))).toEqual([415, expect.any(String)]);
    expect(status(() => checkExecAllowed(true, 'Application/JSON; charset=utf-8'))).toBe(0);
  });
});

describe('runCommand: /bin/sh -c in its own process group', () => {
  it('answers exit status, both outputs and the time taken', async () => {
    const r = await runCommand(req('echo out; echo err >&2; exit 3'));
    expect(r).toMatchObject({ exit_code: 3, signal: null, stdout: 'out\n', stderr: 'err\n', truncated: false, timed_out: false });
    expect(r.duration_ms).toBeGreaterThanOrEqual(0);
    expect((await runCommand(req('pwd'))).stdout).toBe(`${base}\n`);
    expect((await runCommand(req('cat'))).stdout).toBe(''); // stdin is /dev/null: cat ends at once
  });

  it('kills the whole group at the timeout, reporting SIGKILL', async () => {
    const t0 = Date.now();
    const r = await runCommand(req('sleep 10 & echo $!; wait', { timeoutMs: 300 }));
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(r).toMatchObject({ exit_code: null, signal: 'SIGKILL', timed_out: true });
    expect(await eventuallyGone(Number(r.stdout.trim()))).toBe(true);
  });

  it('kills what the command left running when the shell exits, and does not wait for it', async () => {
    const t0 = Date.now();
    const r = await runCommand(req('sleep 10 & echo $!'));
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(r).toMatchObject({ exit_code: 0, signal: null, timed_out: false });
    expect(await eventuallyGone(Number(r.stdout.trim()))).toBe(true);
  });

  it('does not wait past a short grace for a process that left the group and holds the pipes', async () => {
    const t0 = Date.now();
    // The pause lets setsid move sleep out of the group before the shell exits.
    const r = await runCommand(req('setsid sleep 5 & echo $!; sleep 0.3', { timeoutMs: 8000 }));
    const pid = Number(r.stdout.trim());
    try {
      expect(r.exit_code).toBe(0);
      expect(Date.now() - t0).toBeLessThan(2000);
      expect(gone(pid)).toBe(false); // it did escape the group: the answer came without it
    } finally {
      process.kill(pid, 'SIGKILL');
    }
  });

  it('kills the command when the client goes away', async () => {
    const ac = new AbortController();
    const running = runCommand(req('sleep 10'), { signal: ac.signal });
    setTimeout(() => ac.abort(), 100);
    const r = await running;
    expect(r).toMatchObject({ signal: 'SIGKILL', timed_out: false });
    expect(r.duration_ms).toBeLessThan(3000);
  });

  it('keeps at most the cap of each output, drains the rest, and says so', async () => {
    const r = await runCommand(req("head -c 5000 /dev/zero | tr '\\0' a; echo done >&2"), { capBytes: 1000 });
    expect(r.stdout).toBe('a'.repeat(1000));
    expect(r.stderr).toBe('done\n');
    expect(r.truncated).toBe(true);
    expect(r.exit_code).toBe(0);
    // A character the cap cuts in two is dropped, not turned into U+FFFD.
    const cut = await runCommand(req("printf 'ab\\303\\251cd'"), { capBytes: 3 });
    expect([cut.stdout, cut.truncated]).toEqual(['ab', true]);
    expect((await runCommand(req("printf '\\303\\251'"), { capBytes: 2 })).stdout).toBe('é');
  });

  it("hands the command the server's environment without svc's secrets", async () => {
    const env = commandEnv({ PATH: process.env.PATH, SVC_API_KEY: 'k', SVC_CONTEXT_KEY: 'c', HOME: '/h' });
    expect(env).toEqual({ PATH: process.env.PATH, HOME: '/h' });
    const r = await runCommand(req('echo "[$SVC_API_KEY][$HOME]"'), { env });
    expect(r.stdout).toBe('[][/h]\n');
  });
});

describe('StudioModule at boot', () => {
  const warnings = (studio: boolean, studioExec: boolean, required: boolean): string[] => {
    const spy = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      new StudioModule({ features: { studio, studioExec } } as never, { required } as never).onModuleInit();
      return spy.mock.calls.map((c) => String(c[0]));
    } finally {
      spy.mockRestore();
    }
  };

  it('registers the routes only under -studio', () => {
    const on = StudioModule.forRoot({ features: { studio: true } } as never);
    expect(on.controllers?.map((c) => c.name)).toEqual(['StudioController']);
    expect(StudioModule.forRoot({ features: { studio: false, studioExec: true } } as never).controllers).toEqual([]);
  });

  it('warns when -studio-exec runs without credentials or without -studio, and only then', () => {
    expect(warnings(true, true, false)).toEqual([expect.stringMatching(/^-studio-exec on a server without credentials: any program on this machine can run commands/)]);
    expect(warnings(false, true, true)).toEqual(['-studio-exec without -studio: the studio is not served, so no command can run']);
    expect(warnings(true, true, true)).toEqual([]);
    expect(warnings(true, false, false)).toEqual([]);
  });
});
