/**
 * `tool_choice: "required"` or a named function, for a dispatch model with Hermes-style tool calls: the output is
 * made exactly one call, `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, by JSON mode on the model
 * server (the schema and the literal tags around the object go in the Generate request). A named function: that name,
 * and the arguments fit its `parameters` schema; "required": one of the tools' calls, each name with its own
 * arguments' schema (a union of the call shapes; where a tool's schema uses `$ref`s, which name definitions of its
 * own, the name is one of the tools' and the arguments any object). The keywords that only bound values (`minimum`,
 * `pattern`, `format`, lengths...) are taken out: the server enforces the structure and the types, not those bounds.
 * Pure.
 *
 * @example
 * const f = forcedToolCall(tools, { name: "get_weather" });
 * f.schema; // { type: "object", properties: { name: { const: "get_weather" }, arguments: {...} }, required: [...], ... }
 */

export const TOOL_CALL_PREFIX = "<tool_call>\n";
export const TOOL_CALL_SUFFIX = "\n</tool_call>";

/** Keywords that bound a value without changing its shape: JSON mode does not enforce them (json-schema.ts refuses them). */
const BOUNDS = new Set([
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "minLength",
  "maxLength",
  "pattern",
  "format",
  "minProperties",
  "maxProperties",
  "uniqueItems",
  "examples",
  "contentEncoding",
  "contentMediaType",
]);

/** A copy of a schema without the value bounds, at every depth (property names untouched). */
export function withoutBounds(schema: unknown, inProperties = false): unknown {
  if (Array.isArray(schema)) return schema.map((s) => withoutBounds(s));
  if (typeof schema !== "object" || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    if (!inProperties && BOUNDS.has(k)) continue;
    out[k] = withoutBounds(v, !inProperties && (k === "properties" || k === "$defs" || k === "definitions"));
  }
  return out;
}

interface FunctionTool {
  function: { name: string; parameters?: unknown };
}

/** The call object for `name`: its arguments of `params` (bounds taken out), any object when it has none. */
const callShape = (name: object, params: unknown) => ({
  type: "object",
  properties: { name, arguments: params === undefined ? { type: "object" } : withoutBounds(params) },
  required: ["name", "arguments"],
  additionalProperties: false,
});

const usesRefs = (schema: unknown) => JSON.stringify(schema ?? null).includes('"$ref"');

export function forcedToolCall(tools: readonly unknown[], choice: "required" | { name: string }): { schema: object; prefix: string; suffix: string } {
  const fns = (tools as FunctionTool[]).map((t) => t.function);
  let schema: object;
  if (choice !== "required") schema = callShape({ const: choice.name }, fns.find((f) => f.name === choice.name)?.parameters);
  else if (fns.some((f) => usesRefs(f.parameters))) schema = callShape({ enum: [...new Set(fns.map((f) => f.name))] }, undefined);
  else {
    const shapes = [...new Map(fns.map((f) => [f.name, callShape({ const: f.name }, f.parameters)])).values()];
    schema = shapes.length === 1 ? shapes[0]! : { anyOf: shapes };
  }
  return { schema, prefix: TOOL_CALL_PREFIX, suffix: TOOL_CALL_SUFFIX };
}
