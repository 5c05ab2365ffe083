import { ArgumentMetadata, BadRequestException, ValidationError, ValidationPipe } from '@nestjs/common';
import { getMetadataStorage, IS_OPTIONAL, ValidationTypes } from 'class-validator';
import type { ValidationMetadata } from 'class-validator/types/metadata/ValidationMetadata';

/**
 * DTO validation: unknown fields are ignored (spec rule 4); a wrong type is a
 * 400 "cannot parse request: <field>: <problem>".
 */
export function validationPipe(): ValidationPipe {
  memoizeRuleLookup();
  skipAbsentOptionalFields();
  listKeysLinearly();
  return new BodyValidationPipe({
    transform: true,
    whitelist: false,
    forbidUnknownValues: false,
    transformOptions: { enableImplicitConversion: false },
    exceptionFactory: (errors) => new BadRequestException(`cannot parse request: ${describe(errors)}`),
  });
}

/** Types Nest's pipe leaves unchecked (a body declared as one of them is taken as it comes). */
const UNCHECKED: unknown[] = [String, Boolean, Number, Array, Object, Buffer, Date];

/** A request DTO is an object: a body that is an array, a string or null is said to be one. */
class BodyValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    const dto = metadata.type === 'body' && metadata.metatype && !UNCHECKED.includes(metadata.metatype);
    if (dto && value !== undefined && (value === null || typeof value !== 'object' || Array.isArray(value))) {
      throw new BadRequestException(`cannot parse request: the body must be a JSON object (got ${typeOf(value)})`);
    }
    // Nest deletes every `constructor` and `prototype` key of the body in place (`__proto__` never
    // gets here: the body parser refuses it; bodies built otherwise lose it). They are
    // ordinary names in a JSON schema, tool parameters or a decision's state: put back after.
    const kept = dto ? holdersOf(value, ['constructor', 'prototype']) : [];
    const out = await super.transform(value, metadata);
    // Put back in their places: key order is meaning in a schema (the order properties are written in).
    for (const [obj, entries] of kept) {
      for (const k of Object.keys(obj)) delete (obj as Record<string, unknown>)[k];
      for (const [k, v] of entries) if (k !== '__proto__') Object.defineProperty(obj, k, { value: v, enumerable: true, writable: true, configurable: true });
    }
    return dto ? keepFreeForm(value, out) : out;
  }
}

/** Every object below `v` with an own key among `names`, with all its entries in order. */
function holdersOf(v: unknown, names: string[], out: Array<[object, Array<[string, unknown]>]> = []): Array<[object, Array<[string, unknown]>]> {
  if (v === null || typeof v !== 'object') return out;
  if (Array.isArray(v)) {
    for (const x of Object.values(v)) holdersOf(x, names, out);
    return out;
  }
  const entries = Object.entries(v);
  if (entries.some(([k]) => names.includes(k))) out.push([v, entries]);
  for (const [, x] of entries) holdersOf(x, names, out);
  return out;
}

/**
 * class-transformer copies a free-form object (a JSON schema, tool parameters, a decision's
 * state) key by key and skips every key that names a method of Object.prototype: a schema
 * property `constructor` or `toString` vanished, and a schema requiring it became one the
 * output broke. Where the transformed value is such a plain copy, the body's own value is put
 * back whole; nested DTO instances are walked into, so what they converted stays.
 */
export function keepFreeForm(original: unknown, transformed: unknown): unknown {
  if (Array.isArray(original) && Array.isArray(transformed)) {
    for (let i = 0; i < transformed.length && i < original.length; i++) transformed[i] = keepFreeForm(original[i], transformed[i]);
    return transformed;
  }
  if (!isPlainObject(original) || transformed === null || typeof transformed !== 'object') return transformed;
  const proto = Object.getPrototypeOf(transformed);
  if (proto === Object.prototype || proto === null) return original;
  const t = transformed as Record<string, unknown>;
  for (const k of Object.keys(t)) if (Object.prototype.hasOwnProperty.call(original, k)) t[k] = keepFreeForm((original as Record<string, unknown>)[k], t[k]);
  return transformed;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function describe(errors: ValidationError[], prefix = ''): string {
  const out: string[] = [];
  for (const e of errors) {
    const field = prefix ? `${prefix}.${e.property}` : e.property;
    if (e.constraints) {
      const problem = firstProblem(e.constraints);
      // "each value in context must be …": the array itself shows which value is wrong.
      const got = Array.isArray(e.value) && problem.startsWith('each value') ? `the array ${abbreviated(JSON.stringify(e.value))}` : typeOf(e.value);
      out.push(`${field}: ${problem} (got ${got})`);
    }
    if (e.children?.length) out.push(describe(e.children, field));
  }
  return out.filter(Boolean).join('; ');
}

/** A type check's message before a range's: "ten" is not an integer, rather than one "less than 0". */
function firstProblem(constraints: Record<string, string>): string {
  const keys = Object.keys(constraints);
  return constraints[keys.find((k) => /^is[A-Z]/.test(k)) ?? keys[0]];
}

function abbreviated(text: string): string {
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}

function typeOf(v: unknown): string {
  if (v === undefined) return 'no value';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return `the string ${JSON.stringify(abbreviated(v))}`;
  if (typeof v === 'number' || typeof v === 'boolean') return `${typeof v} ${v}`;
  return typeof v === 'object' ? 'an object' : typeof v;
}

type Lookup = (target: unknown, schema: string, always: boolean, strictGroups: boolean, groups?: string[]) => unknown[];
interface RuleStorage {
  getTargetValidationMetadatas: Lookup;
  groupByPropertyName(metadata: unknown[]): Record<string, unknown[]>;
  addValidationMetadata(metadata: unknown): void;
  addConstraintMetadata(metadata: unknown): void;
}
const MEMOIZED = Symbol.for('svc.validationRulesMemoized');

/**
 * class-validator works out a class's rules again on every validate call: a
 * scan of every registered class for parents, filters, grouping by property
 * (about half of a request body's validation, measured). The rules are fixed
 * once the DTO classes are defined, so the answers are kept per class and
 * options; registering a rule later forgets them. Callers only read them.
 */
export function memoizeRuleLookup(): void {
  const storage = getMetadataStorage() as unknown as RuleStorage & { [MEMOIZED]?: true };
  if (storage[MEMOIZED]) return;
  storage[MEMOIZED] = true;
  const lookup = storage.getTargetValidationMetadatas.bind(storage);
  const group = storage.groupByPropertyName.bind(storage);
  let rules = new Map<unknown, Map<string, unknown[]>>();
  let grouped = new WeakMap<unknown[], Record<string, unknown[]>>();
  const forget = () => {
    rules = new Map();
    grouped = new WeakMap();
  };
  storage.getTargetValidationMetadatas = (target, schema, always, strictGroups, groups) => {
    const key = `${schema}\0${always}\0${strictGroups}\0${groups?.join('\0') ?? ''}`;
    let perTarget = rules.get(target);
    if (!perTarget) rules.set(target, (perTarget = new Map()));
    let hit = perTarget.get(key);
    if (!hit) perTarget.set(key, (hit = lookup(target, schema, always, strictGroups, groups)));
    return hit;
  };
  storage.groupByPropertyName = (metadata) => {
    let hit = grouped.get(metadata);
    if (!hit) grouped.set(metadata, (hit = group(metadata)));
    return hit;
  };
  for (const add of ['addValidationMetadata', 'addConstraintMetadata'] as const) {
    const original = storage[add].bind(storage);
    storage[add] = (metadata: unknown) => {
      forget();
      original(metadata);
    };
  }
}

const SKIPS_ABSENT = Symbol.for('svc.validationSkipsAbsentOptional');

/**
 * For every rule-bearing property, absent or not, class-validator builds a
 * ValidationError and five filtered rule lists, then throws them away: a
 * request DTO declares ~50 optional fields and a body sets a handful, so that
 * was most of a request's validation time and ~40 KB of garbage. A property
 * whose value is null or undefined and that carries @IsOptional produces
 * nothing (IsOptional's condition fails, which ends its checks before any
 * other, @IsDefined included), so it is left out of the property list the
 * executor walks; the rest keep their order, so messages are unchanged.
 */
export function skipAbsentOptionalFields(): void {
  // Not in class-validator's public API: wrapped to know which object is being checked.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { ValidationExecutor } = require('class-validator/cjs/validation/ValidationExecutor') as { ValidationExecutor: { prototype: unknown } };
  const proto = ValidationExecutor.prototype as {
    execute(this: unknown, object: Record<string, unknown>, schema: string, errors: unknown[]): void;
    [SKIPS_ABSENT]?: true;
  };
  if (proto[SKIPS_ABSENT]) return;
  proto[SKIPS_ABSENT] = true;
  memoizeRuleLookup();
  const storage = getMetadataStorage() as unknown as RuleStorage;
  const group = storage.groupByPropertyName.bind(storage);
  const optional = new WeakMap<Record<string, unknown[]>, Set<string>>();
  // execute() is synchronous and recursive (nested DTOs): the object under check, innermost first.
  let current: Record<string, unknown> | undefined;
  const execute = proto.execute;
  proto.execute = function (this: { validatorOptions?: { whitelist?: boolean } }, object, schema, errors) {
    const outer = current;
    // With whitelist on, the property list also decides which fields are stripped: left whole.
    current = this.validatorOptions?.whitelist ? undefined : object;
    try {
      execute.call(this, object, schema, errors);
    } finally {
      current = outer;
    }
  };
  storage.groupByPropertyName = (metadata) => {
    const all = group(metadata);
    const object = current;
    if (!object || typeof object !== 'object') return all;
    let skippable = optional.get(all);
    if (!skippable) {
      skippable = new Set(Object.keys(all).filter((k) => (all[k] as ValidationMetadata[]).some((r) => r.type === ValidationTypes.CONDITIONAL_VALIDATION && r.name === IS_OPTIONAL)));
      optional.set(all, skippable);
    }
    const present: Record<string, unknown[]> = {};
    for (const k in all) if (!skippable.has(k) || (object[k] !== undefined && object[k] !== null)) present[k] = all[k];
    return present;
  };
}

const LINEAR_KEYS = Symbol.for('svc.transformerListsKeysLinearly');

/**
 * class-transformer lists an object's keys and then drops duplicates with indexOf inside filter:
 * quadratic in the keys of one object. A body with one free-form object of 100k keys (a state,
 * metadata) held the event loop 3.6 s, 400k keys about a minute. Where nothing can add or remove
 * a key (no @Expose/@Exclude metadata and no strategy on the class, none in our options: every
 * free-form object and every request DTO here), the answer is exactly Object.keys: returned
 * straight away. Anything else takes class-transformer's own path.
 */
export function listKeysLinearly(): void {
  // Not in class-transformer's public API: wrapped as class-validator's executor is above.
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { TransformOperationExecutor } = require('class-transformer/cjs/TransformOperationExecutor') as { TransformOperationExecutor: { prototype: Record<string | symbol, unknown> } };
  const { defaultMetadataStorage } = require('class-transformer/cjs/storage') as {
    defaultMetadataStorage: { getStrategy(t: unknown): string; getExposedMetadatas(t: unknown): unknown[]; getExcludedMetadatas(t: unknown): unknown[] };
  };
  /* eslint-enable @typescript-eslint/no-require-imports */
  const proto = TransformOperationExecutor.prototype;
  if (proto[LINEAR_KEYS]) return;
  proto[LINEAR_KEYS] = true;
  const original = proto.getKeys as (this: { options: Record<string, unknown> }, target: unknown, object: object, isMap: boolean) => string[];
  proto.getKeys = function (this: { options: Record<string, unknown> }, target: unknown, object: object, isMap: boolean): string[] {
    const o = this.options;
    const plain = !isMap && !(object instanceof Map) && !o.strategy && !o.excludeExtraneousValues && !o.ignoreDecorators && !o.version && !(o.excludePrefixes as unknown[] | undefined)?.length;
    const bare = target === undefined || (defaultMetadataStorage.getStrategy(target) === 'none' && defaultMetadataStorage.getExposedMetadatas(target).length === 0 && defaultMetadataStorage.getExcludedMetadatas(target).length === 0);
    return plain && bare ? Object.keys(object) : original.call(this, target, object, isMap);
  };
}
