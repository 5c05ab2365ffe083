import { InvalidRequestError } from '../core/errors';

/** Past this many schema nodes after inlining, a tool's parameters are refused (shared definitions multiply). */
const MAX_INLINED_NODES = 20_000;

/**
 * A tool's parameter schema with its local `$ref`s ("#/$defs/Address", as pydantic
 * writes nested models, or "#/definitions/...") replaced by what they point at.
 * llama.cpp builds a tool call's grammar from a schema that wraps each tool's
 * parameters (`{"name": ..., "arguments": <parameters>}` and the like) and resolves
 * "#/..." against that wrapper, where the tool's own `$defs` are not: every such
 * tool was refused. A `$ref` that points into itself (a recursive model) cannot be
 * inlined and is refused by name; other `$ref`s (remote ones) are left to llama.cpp.
 */
export function inlineLocalRefs(schema: Record<string, unknown>, what: string): Record<string, unknown> {
  if (!JSON.stringify(schema).includes('"$ref"')) return schema;
  let nodes = 0;
  const walk = (node: unknown, open: string[]): unknown => {
    if (++nodes > MAX_INLINED_NODES) {
      throw new InvalidRequestError(`${what}: the schema is too large once its $refs are inlined (over ${MAX_INLINED_NODES} nodes)`);
    }
    if (Array.isArray(node)) return node.map((x) => walk(x, open));
    if (!node || typeof node !== 'object') return node;
    const obj = node as Record<string, unknown>;
    const ref = obj.$ref;
    if (typeof ref === 'string' && ref.startsWith('#')) {
      if (open.includes(ref)) throw new InvalidRequestError(`${what}: the $ref ${ref} refers to itself (a recursive schema), which a tool's parameters cannot use here`);
      const target = resolvePointer(schema, ref, what);
      const { $ref: _ref, ...siblings } = obj;
      if (obj === schema) {
        delete siblings.$defs;
        delete siblings.definitions;
      }
      // Keywords beside a $ref apply too (a description, a default): laid over the target.
      return walk({ ...(target as Record<string, unknown>), ...siblings }, [...open, ref]);
    }
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(obj)) {
      // The definitions themselves are not output: every use of them is inlined.
      if (open.length === 0 && node === schema && (k === '$defs' || k === 'definitions')) continue;
      out[k] = walk(v, open);
    }
    return out;
  };
  return walk(schema, []) as Record<string, unknown>;
}

/** A JSON pointer in a URI fragment ("#/$defs/A~1B") within `root`. */
function resolvePointer(root: unknown, ref: string, what: string): unknown {
  let at: unknown = root;
  const path = ref.slice(1);
  if (path === '') return root;
  for (const raw of path.split('/').slice(1)) {
    let key: string;
    try {
      key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    } catch {
      throw new InvalidRequestError(`${what}: the $ref ${ref} is not a valid JSON pointer`);
    }
    if (!at || typeof at !== 'object' || !(key in (at as object))) {
      throw new InvalidRequestError(`${what}: the $ref ${ref} points at nothing in the schema`);
    }
    at = (at as Record<string, unknown>)[key];
  }
  if (!at || typeof at !== 'object' || Array.isArray(at)) {
    if (typeof at === 'boolean') return at ? {} : { not: {} };
    throw new InvalidRequestError(`${what}: the $ref ${ref} does not point at a schema`);
  }
  return at;
}
