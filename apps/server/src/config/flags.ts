import { StartupError } from '../../../../libs/engine/src/core/errors';
import { FLAGS, FlagDef } from './flag-table';

export type FlagValues = Record<string, string | boolean | number | string[]>;

export class FlagError extends StartupError {}

/**
 * Go-style flags, as the spec writes them: `-flag value`, `-flag=value`,
 * `--flag` too; booleans take `=false` (a bare boolean flag means true).
 */
export function parseFlags(argv: string[], env: NodeJS.ProcessEnv = {}): { flags: FlagValues; positional: string[] } {
  const byName = new Map<string, FlagDef>();
  for (const f of FLAGS) for (const n of [f.name, ...(f.aliases ?? [])]) byName.set(n, f);
  const flags: FlagValues = {};
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positional.push(arg);
      continue;
    }
    const body = arg.replace(/^--?/, '');
    const eq = body.indexOf('=');
    const name = eq >= 0 ? body.slice(0, eq) : body;
    const def = byName.get(name);
    if (!def) throw new FlagError(`unknown flag -${name} (see svc -help)`);
    let raw: string | undefined = eq >= 0 ? body.slice(eq + 1) : undefined;
    if (def.kind === 'bool') {
      flags[def.name] = raw === undefined ? true : parseBool(def, raw);
      continue;
    }
    if (raw === undefined) {
      if (i + 1 >= argv.length) throw new FlagError(`flag -${name} needs a value`);
      raw = argv[++i];
    }
    setValue(flags, def, raw);
  }
  for (const def of FLAGS) {
    if (flags[def.name] !== undefined || !def.env) continue;
    const raw = env[def.env];
    if (raw !== undefined && raw !== '') setValue(flags, def, raw, true);
  }
  return { flags, positional };
}

function setValue(flags: FlagValues, def: FlagDef, raw: string, fromEnv = false): void {
  switch (def.kind) {
    case 'int': {
      if (!/^-?\d+$/.test(raw.trim())) throw new FlagError(`flag -${def.name} wants an integer, got "${raw}"`);
      flags[def.name] = Number(raw);
      return;
    }
    case 'list': {
      const prev = (flags[def.name] as string[] | undefined) ?? [];
      const items = def.wholeItems && !fromEnv ? [raw] : raw.split(',').map((s) => s.trim()).filter(Boolean);
      if (def.wholeItems && (items.length === 0 || items.some((s) => s.trim() === ''))) {
        throw new FlagError(fromEnv ? `$${def.env} holds no value for -${def.name}` : `flag -${def.name} wants a value, got an empty one`);
      }
      flags[def.name] = [...prev, ...items];
      return;
    }
    case 'bool':
      flags[def.name] = parseBool(def, raw);
      return;
    default:
      flags[def.name] = raw;
  }
}

function parseBool(def: FlagDef, raw: string): boolean {
  const v = raw.toLowerCase();
  if (['1', 't', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'f', 'false', 'no', 'off'].includes(v)) return false;
  throw new FlagError(`flag -${def.name} wants true or false, got "${raw}"`);
}

export function helpText(): string {
  const lines = FLAGS.map((f) => {
    const names = [f.name, ...(f.aliases ?? [])].map((n) => `-${n}`).join(', ');
    const val = f.kind === 'bool' ? '' : f.kind === 'int' ? ' N' : ' VALUE';
    return `  ${(names + val).padEnd(34)} ${f.help}${f.env ? ` [$${f.env}]` : ''}`;
  });
  return ['usage: svc [flags]', '', ...lines].join('\n');
}
