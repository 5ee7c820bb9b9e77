/**
 * Checks merged values against the chart's values.schema.json, as `helm
 * install/upgrade/template` does, so a typo in a user's values file
 * (`modelServer.gpu: 2`) fails CI and Helm alike instead of being ignored.
 * Implements the JSON Schema (draft 7) keywords the chart's schema uses and
 * refuses any other keyword, so the schema cannot rely on something this
 * checker would silently skip.
 *
 * @example
 * const problems = checkValues(schema, values); // ["modelServer: unknown key gpu"]
 */
import { TemplateError } from "./errors";

type Schema = Record<string, unknown>;

const KNOWN = new Set(["$schema", "title", "description", "type", "properties", "additionalProperties", "required", "enum", "items", "minimum", "maximum", "minLength", "pattern"]);

function typeOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

/** Every violation, one line each, with the values path. */
export function checkValues(schema: Schema, values: unknown, path = ""): string[] {
  const at = path || "(root)";
  for (const k of Object.keys(schema)) if (!KNOWN.has(k)) throw new TemplateError(`values.schema.json ${at}: keyword ${k} is outside the supported subset`);
  const out: string[] = [];
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string];
    const t = typeOf(values);
    if (!types.includes(t) && !(t === "integer" && types.includes("number"))) return [`${at}: expected ${types.join(" or ")}, got ${t}`];
  }
  if (schema.enum && !(schema.enum as unknown[]).includes(values)) out.push(`${at}: must be one of ${(schema.enum as unknown[]).map((e) => JSON.stringify(e)).join(", ")}`);
  if (typeof values === "number") {
    if (typeof schema.minimum === "number" && values < schema.minimum) out.push(`${at}: must be >= ${schema.minimum}`);
    if (typeof schema.maximum === "number" && values > schema.maximum) out.push(`${at}: must be <= ${schema.maximum}`);
  }
  if (typeof values === "string") {
    if (typeof schema.minLength === "number" && values.length < schema.minLength) out.push(`${at}: must not be empty`);
    if (typeof schema.pattern === "string" && !new RegExp(schema.pattern, "u").test(values)) out.push(`${at}: must match ${schema.pattern}`);
  }
  if (Array.isArray(values) && schema.items) values.forEach((v, i) => out.push(...checkValues(schema.items as Schema, v, `${path}[${i}]`)));
  if (typeOf(values) === "object") {
    const obj = values as Record<string, unknown>;
    const props = (schema.properties ?? {}) as Record<string, Schema>;
    for (const r of (schema.required ?? []) as string[]) if (!(r in obj)) out.push(`${at}: missing required key ${r}`);
    for (const [k, v] of Object.entries(obj)) {
      const sub = path ? `${path}.${k}` : k;
      if (props[k]) out.push(...checkValues(props[k]!, v, sub));
      else if (schema.additionalProperties === false) out.push(`${at}: unknown key ${k}`);
      else if (typeof schema.additionalProperties === "object") out.push(...checkValues(schema.additionalProperties as Schema, v, sub));
    }
  }
  return out;
}
