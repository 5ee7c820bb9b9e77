/**
 * A JSON Schema as the shapes JSON mode can enforce byte by byte (json-state.ts): OpenAI's structured outputs
 * subset. Supported: `type` (object, array, string, number, integer, boolean, null, or a list of them), `properties`,
 * `required`, `additionalProperties` (false, absent = false as in OpenAI's strict mode, true, or a schema), `items`,
 * `minItems` / `maxItems`, `enum` and `const` of strings, numbers, booleans and null, `anyOf` (and `oneOf`: its
 * "exactly one" is not enforced, an output that fits several options passes), `$ref` into `$defs` /
 * `definitions` (recursion included), `description` / `title` / `default` / `$schema` (ignored). Anything else is
 * refused with the keyword named, rather than silently not enforced. Pure.
 *
 * @example
 * const root = compileSchema({ type: "object", properties: { city: { type: "string" } }, required: ["city"] });
 */

export type SchemaNode =
  | { kind: "any"; id: number }
  | { kind: "object"; id: number; props: Map<string, SchemaNode>; required: ReadonlySet<string>; additional: SchemaNode | null }
  | { kind: "array"; id: number; items: SchemaNode; min: number; max: number }
  | { kind: "string"; id: number; values: readonly string[] | null }
  | { kind: "number"; id: number; integer: boolean }
  | { kind: "literal"; id: number; text: "true" | "false" | "null" }
  /** Numbers of an enum, as JSON writes them (JSON.stringify). */
  | { kind: "numbers"; id: number; values: readonly string[] }
  | { kind: "union"; id: number; options: SchemaNode[] };

export class SchemaError extends Error {
  override readonly name = "SchemaError";
}

/**
 * Bounds on what one request's schema may ask (each state's mask is computed on the engine's thread, so a schema is
 * work every step): nodes, enum values and properties in all, and nesting.
 */
export const SCHEMA_LIMITS = { nodes: 4096, values: 2048, depth: 32 };

let ids = 1;
/** Unconstrained JSON (any value). */
export const ANY: SchemaNode = { kind: "any", id: 0 };
/** What `response_format: json_object` asks: one object, any content. */
export const ANY_OBJECT: SchemaNode = { kind: "object", id: -1, props: new Map(), required: new Set(), additional: ANY };

const IGNORED = new Set(["description", "title", "default", "$schema", "$id", "examples", "$comment", "strict", "$defs", "definitions"]);
const KNOWN = new Set(["type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "$ref"]);

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

export function compileSchema(schema: unknown): SchemaNode {
  if (!isObj(schema)) throw new SchemaError("the schema must be an object");
  let nodes = 0;
  let valuesSeen = 0;
  let depth = 0;
  const count = (n: SchemaNode): SchemaNode => {
    if (++nodes > SCHEMA_LIMITS.nodes) throw new SchemaError(`more than ${SCHEMA_LIMITS.nodes} schema nodes`);
    return n;
  };
  const root = schema;
  const defs = { ...(isObj(root.definitions) ? root.definitions : {}), ...(isObj(root.$defs) ? root.$defs : {}) } as Json;
  const byRef = new Map<string, SchemaNode>();

  // options may start alike (two object shapes): the recognizer follows each until the bytes tell them apart
  function union(options: SchemaNode[]): SchemaNode {
    return options.length === 1 ? options[0]! : { kind: "union", id: ids++, options };
  }

  function values(list: unknown[], at: string): SchemaNode {
    valuesSeen += list.length;
    if (valuesSeen > SCHEMA_LIMITS.values) throw new SchemaError(`${at}: more than ${SCHEMA_LIMITS.values} enum values and properties in all`);
    const strings = list.filter((v): v is string => typeof v === "string");
    const numbers = list.filter((v): v is number => typeof v === "number" && Number.isFinite(v));
    const rest = list.filter((v) => typeof v !== "string" && typeof v !== "number");
    const options: SchemaNode[] = strings.length ? [{ kind: "string", id: ids++, values: [...new Set(strings)] }] : [];
    if (numbers.length) options.push({ kind: "numbers", id: ids++, values: [...new Set(numbers.map((v) => JSON.stringify(v)))] });
    if (list.some((v) => typeof v === "number" && !Number.isFinite(v))) throw new SchemaError(`${at}: enum values must be finite numbers`);
    for (const v of new Set(rest)) {
      if (v === true || v === false || v === null) options.push({ kind: "literal", id: ids++, text: String(v) as "true" | "false" | "null" });
      else throw new SchemaError(`${at}: enum and const values must be strings, numbers, booleans or null (got ${JSON.stringify(v)})`);
    }
    if (options.length === 0) throw new SchemaError(`${at}: an empty enum`);
    return union(options);
  }

  function ofType(t: string, s: Json, at: string): SchemaNode {
    switch (t) {
      case "object": {
        const props = new Map<string, SchemaNode>();
        if (s.properties !== undefined) {
          if (!isObj(s.properties)) throw new SchemaError(`${at}.properties must be an object`);
          const entries = Object.entries(s.properties);
          valuesSeen += entries.length;
          if (valuesSeen > SCHEMA_LIMITS.values) throw new SchemaError(`${at}: more than ${SCHEMA_LIMITS.values} enum values and properties in all`);
          for (const [k, v] of entries) props.set(k, node(v, `${at}.properties.${k}`));
        }
        const required = new Set<string>();
        if (s.required !== undefined) {
          if (!Array.isArray(s.required) || !s.required.every((r) => typeof r === "string")) throw new SchemaError(`${at}.required must be a list of names`);
          for (const r of s.required as string[]) {
            if (!props.has(r)) throw new SchemaError(`${at}.required names '${r}', which is not in properties`);
            required.add(r);
          }
        }
        const ap = s.additionalProperties;
        const additional = ap === undefined || ap === false ? null : ap === true ? ANY : node(ap, `${at}.additionalProperties`);
        if (props.size === 0 && additional === null && s.properties === undefined && ap === undefined) return { kind: "object", id: ids++, props, required, additional: ANY };
        return { kind: "object", id: ids++, props, required, additional };
      }
      case "array": {
        const min = s.minItems === undefined ? 0 : Number(s.minItems);
        const max = s.maxItems === undefined ? Number.POSITIVE_INFINITY : Number(s.maxItems);
        if (!Number.isInteger(min) || min < 0 || !(max >= min)) throw new SchemaError(`${at}: minItems / maxItems must be integers, min <= max`);
        return { kind: "array", id: ids++, items: s.items === undefined ? ANY : node(s.items, `${at}.items`), min, max };
      }
      case "string":
        return { kind: "string", id: ids++, values: null };
      case "number":
      case "integer":
        return { kind: "number", id: ids++, integer: t === "integer" };
      case "boolean":
        return union([{ kind: "literal", id: ids++, text: "true" }, { kind: "literal", id: ids++, text: "false" }]);
      case "null":
        return { kind: "literal", id: ids++, text: "null" };
      default:
        throw new SchemaError(`${at}.type '${t}' is not a JSON Schema type`);
    }
  }

  function node(s: unknown, at: string): SchemaNode {
    if (++depth > SCHEMA_LIMITS.depth) throw new SchemaError(`${at}: nested deeper than ${SCHEMA_LIMITS.depth}`);
    try {
      return count(nodeAt(s, at));
    } finally {
      depth--;
    }
  }

  function nodeAt(s: unknown, at: string): SchemaNode {
    if (s === true) return ANY;
    if (!isObj(s)) throw new SchemaError(`${at} must be a schema (an object)`);
    for (const k of Object.keys(s)) if (!KNOWN.has(k) && !IGNORED.has(k)) throw new SchemaError(`${at}: '${k}' is not supported in JSON mode`);
    if (typeof s.$ref === "string") {
      const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(s.$ref);
      if (!m) throw new SchemaError(`${at}.$ref '${s.$ref}': only '#/$defs/...' and '#/definitions/...' are supported`);
      const name = m[2]!;
      const hit = byRef.get(name);
      if (hit) return hit;
      const target = defs[name];
      if (target === undefined) throw new SchemaError(`${at}.$ref '${s.$ref}' names no definition`);
      // the node object exists before its definition is compiled and is filled in place, so a recursive reference
      // (met while compiling it) points at the finished node
      const slot = { kind: "any", id: ids++ } as SchemaNode;
      byRef.set(name, slot);
      Object.assign(slot, node(target, `#/$defs/${name}`), { id: slot.id });
      return slot;
    }
    if (s.const !== undefined) return values([s.const], at);
    if (s.enum !== undefined) {
      if (!Array.isArray(s.enum)) throw new SchemaError(`${at}.enum must be a list`);
      return values(s.enum, at);
    }
    const alts = s.anyOf ?? s.oneOf;
    if (alts !== undefined) {
      if (!Array.isArray(alts) || alts.length === 0) throw new SchemaError(`${at}.anyOf must be a non-empty list`);
      return union(alts.map((a, i) => node(a, `${at}.anyOf[${i}]`)));
    }
    if (s.type === undefined) return s.properties !== undefined ? ofType("object", s, at) : s.items !== undefined ? ofType("array", s, at) : ANY;
    const types = Array.isArray(s.type) ? s.type : [s.type];
    if (types.length === 0 || !types.every((t) => typeof t === "string")) throw new SchemaError(`${at}.type must be a type name or a list of them`);
    return union((types as string[]).map((t) => ofType(t, s, at)));
  }

  const out = node(root, "#");
  // an object, or a union of object shapes (a forced tool call among several tools)
  if (out.kind !== "object" && !(out.kind === "union" && out.options.every((o) => o.kind === "object"))) {
    throw new SchemaError("the root of the schema must be an object (as OpenAI's structured outputs ask)");
  }
  return out;
}
