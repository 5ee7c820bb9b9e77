import { expect, test } from "bun:test";
import { forcedToolCall, withoutBounds } from "./forced-tool-call";

const tools = [
  { type: "function", function: { name: "book", parameters: { type: "object", properties: { seats: { type: "integer", minimum: 1, maximum: 9 }, pattern: { type: "string", pattern: "^[a-z]+$", format: "email" } }, required: ["seats"] } } },
  { type: "function", function: { name: "cancel" } },
];

test("a named function: its name, its parameters without value bounds (a property called 'pattern' stays)", () => {
  const f = forcedToolCall(tools, { name: "book" });
  expect(f).toEqual({
    schema: {
      type: "object",
      properties: { name: { const: "book" }, arguments: { type: "object", properties: { seats: { type: "integer" }, pattern: { type: "string" } }, required: ["seats"] } },
      required: ["name", "arguments"],
      additionalProperties: false,
    },
    prefix: "<tool_call>\n",
    suffix: "\n</tool_call>",
  });
  // no parameters: any object
  expect((forcedToolCall(tools, { name: "cancel" }).schema as { properties: { arguments: unknown } }).properties.arguments).toEqual({ type: "object" });
});

test("required: one of the tools' calls, each name with its own arguments; with $refs, any name's any object", () => {
  const shape = (name: string, args: object) => ({ type: "object", properties: { name: { const: name }, arguments: args }, required: ["name", "arguments"], additionalProperties: false });
  expect(forcedToolCall(tools, "required").schema).toEqual({
    anyOf: [shape("book", { type: "object", properties: { seats: { type: "integer" }, pattern: { type: "string" } }, required: ["seats"] }), shape("cancel", { type: "object" })],
  });
  // one tool: its call's shape itself
  expect(forcedToolCall(tools.slice(0, 1), "required").schema).toEqual(forcedToolCall(tools, { name: "book" }).schema);
  const withRefs = [...tools, { type: "function", function: { name: "move", parameters: { type: "object", properties: { to: { $ref: "#/$defs/Place" } }, $defs: { Place: { type: "string" } } } } }];
  expect((forcedToolCall(withRefs, "required").schema as { properties: unknown }).properties).toEqual({ name: { enum: ["book", "cancel", "move"] }, arguments: { type: "object" } });
  expect(withoutBounds({ anyOf: [{ type: "string", maxLength: 3 }, { type: "null" }], $defs: { minimum: { type: "number", minimum: 0 } } })).toEqual({
    anyOf: [{ type: "string" }, { type: "null" }],
    $defs: { minimum: { type: "number" } },
  });
});
