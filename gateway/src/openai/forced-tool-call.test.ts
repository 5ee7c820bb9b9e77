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

test("required: any of the tools' names, any arguments object", () => {
  expect((forcedToolCall(tools, "required").schema as { properties: unknown }).properties).toEqual({ name: { enum: ["book", "cancel"] }, arguments: { type: "object" } });
  expect(withoutBounds({ anyOf: [{ type: "string", maxLength: 3 }, { type: "null" }], $defs: { minimum: { type: "number", minimum: 0 } } })).toEqual({
    anyOf: [{ type: "string" }, { type: "null" }],
    $defs: { minimum: { type: "number" } },
  });
});
