import { expect, test } from "bun:test";
import { compileSchema, SchemaError } from "./json-schema";
import { jsonStart, stepJsonBytes, type JsonState } from "./json-state";

const enc = new TextEncoder();
const person = compileSchema({
  type: "object",
  properties: {
    name: { type: "string" },
    age: { type: "integer" },
    role: { enum: ["admin", "user", null] },
    tags: { type: "array", items: { type: "string" }, minItems: 1, maxItems: 2 },
    boss: { anyOf: [{ $ref: "#/$defs/ref" }, { type: "null" }] },
    score: { type: ["number", "null"] },
  },
  required: ["name", "age"],
  additionalProperties: false,
  $defs: { ref: { type: "object", properties: { id: { type: "integer" } }, required: ["id"] } },
});
const run = (text: string): JsonState | null => stepJsonBytes(jsonStart(person), enc.encode(text));
const whole = (text: string) => run(text)?.done === true;

test("objects that fit the schema are whole; every prefix of one is alive", () => {
  for (const doc of [
    '{"name": "Ann", "age": 41}',
    '{"age": -3, "name": "B\\"o", "role": "admin", "tags": ["x"], "boss": {"id": 7}, "score": 2.5e3}',
    '{"name": "C", "age": 0, "role": null, "tags": ["a", "b"], "boss": null, "score": null}',
  ]) {
    expect(whole(doc), doc).toBe(true);
    for (let i = 1; i < doc.length; i++) expect(run(doc.slice(0, i)), doc.slice(0, i)).not.toBeNull();
  }
});

test("what does not fit is refused at the first byte that cannot follow", () => {
  expect(run('{"name": "A"}')).toBeNull(); // age is required: no close
  expect(run('{"nick')).toBeNull(); // not a property
  expect(run('{"name": "A", "name')).toBeNull(); // a key once
  expect(run('{"age": 1.')).toBeNull(); // an integer
  expect(run('{"role": "adm1')).toBeNull(); // not one of the values
  expect(run('{"role": "admin2"')).toBeNull();
  expect(run('{"tags": []')).toBeNull(); // minItems 1
  expect(run('{"tags": ["a", "b", ')).toBeNull(); // maxItems 2
  expect(run('{"tags": [1')).toBeNull(); // strings
  expect(run('{"boss": {"id": 1, "x')).toBeNull(); // $ref'd object: its own properties only
  expect(run('{"score": "1')).toBeNull();
  expect(run('{"name": "A", "age": 1, ')).not.toBeNull(); // optional keys are left
  // once every key came, no comma
  expect(run('{"name": "A", "age": 1, "role": null, "tags": ["a"], "boss": null, "score": 1,')).toBeNull();
});

test("numeric enums: one of the numbers as written, ending where a number may", () => {
  const n = compileSchema({ type: "object", properties: { k: { enum: [1, 12, -0.5, "one"] } }, required: ["k"] });
  const ok = (t: string) => stepJsonBytes(jsonStart(n), enc.encode(t))?.done === true;
  for (const v of ["1", "12", "-0.5", '"one"']) expect(ok(`{"k": ${v}}`), v).toBe(true);
  for (const v of ["2", "13", "-0.50", "1.0", '"two"']) expect(ok(`{"k": ${v}}`), v).toBe(false);
  expect(stepJsonBytes(jsonStart(n), enc.encode('{"k": 3'))).toBeNull();
});

test("recursive definitions, additionalProperties as a schema, a bare object", () => {
  const tree = compileSchema({ $defs: { node: { type: "object", properties: { kids: { type: "array", items: { $ref: "#/$defs/node" } } } } }, $ref: "#/$defs/node" });
  expect(stepJsonBytes(jsonStart(tree), enc.encode('{"kids": [{"kids": [{}]}, {}]}'))?.done).toBe(true);
  // declared properties keep their own schema beside additional ones
  const mixed = compileSchema({ type: "object", properties: { name: { type: "string" } }, additionalProperties: { type: "integer" } });
  expect(stepJsonBytes(jsonStart(mixed), enc.encode('{"x": 1, "name": "n"}'))?.done).toBe(true);
  expect(stepJsonBytes(jsonStart(mixed), enc.encode('{"name": 1'))).toBeNull();
  expect(stepJsonBytes(jsonStart(mixed), enc.encode('{"x": "s'))).toBeNull();
  // a required property among additional ones counts when it comes
  const open = compileSchema({ type: "object", properties: { a: { type: "integer" } }, required: ["a"], additionalProperties: true });
  expect(stepJsonBytes(jsonStart(open), enc.encode('{"z": [], "a": 1}'))?.done).toBe(true);
  expect(stepJsonBytes(jsonStart(open), enc.encode('{"z": []}'))).toBeNull();
  const counts = compileSchema({ type: "object", additionalProperties: { type: "integer" } });
  expect(stepJsonBytes(jsonStart(counts), enc.encode('{"a": 1, "b": 2}'))?.done).toBe(true);
  expect(stepJsonBytes(jsonStart(counts), enc.encode('{"a": "1'))).toBeNull();
  const free = compileSchema({ type: "object" });
  expect(stepJsonBytes(jsonStart(free), enc.encode('{"any": [1, {"x": null}]}'))?.done).toBe(true);
});

test("schemas JSON mode cannot enforce are refused, naming why", () => {
  for (const [s, why] of [
    [{ type: "array" }, /root/],
    [{ type: "object", properties: { a: { type: "string", pattern: "x" } } }, /pattern/],
    [{ type: "object", properties: { a: { enum: [{ x: 1 }] } } }, /enum/],
    [{ type: "object", properties: { a: { $ref: "#/$defs/nope" } } }, /names no definition/],
    [{ type: "object", required: ["b"] }, /not in properties/],
    [{ type: "object", properties: { a: { type: "date" } } }, /not a JSON Schema type/],
    [{ type: "object", properties: { a: { enum: Array.from({ length: 3000 }, (_, i) => `v${i}`) } } }, /enum values/],
    [JSON.parse(`${'{"type": "object", "properties": {"a": '.repeat(40)}{"type": "null"}${"}}".repeat(40)}`), /deeper/],
  ] as const) {
    expect(() => compileSchema(s)).toThrow(SchemaError);
    expect(() => compileSchema(s)).toThrow(why);
  }
});

test("a union of object shapes (a pydantic Union): followed along each until the keys tell them apart", () => {
  const schema = {
    type: "object",
    properties: {
      pet: {
        anyOf: [
          { type: "object", properties: { kind: { const: "cat" }, lives: { type: "integer" } }, required: ["kind", "lives"], additionalProperties: false },
          { type: "object", properties: { kind: { const: "dog" }, good: { type: "boolean" } }, required: ["kind", "good"], additionalProperties: false },
          { type: "string" },
        ],
      },
    },
    required: ["pet"],
    additionalProperties: false,
  };
  const root = compileSchema(schema);
  const run = (t: string) => stepJsonBytes(jsonStart(root), enc.encode(t));
  for (const ok of ['{"pet": {"kind": "cat", "lives": 9}}', '{"pet": {"kind": "dog", "good": true}}', '{"pet": "a fish"}']) expect(run(ok)?.done).toBe(true);
  // a cat's kind with a dog's field, a key of neither, a required key missing: no
  for (const bad of ['{"pet": {"kind": "cat", "good"', '{"pet": {"name"', '{"pet": {"kind": "dog"}', '{"pet": {"kind": "cow"']) {
    const s = run(bad);
    expect(s === null || !s.done).toBe(true);
    if (bad.endsWith('"good"') || bad.endsWith('"name"') || bad.endsWith('"cow"')) expect(s).toBeNull();
  }
  expect(run('{"pet": {"kind": "dog"}}')).toBeNull();
  // while both shapes fit, the state holds both; the keys' mask allows either kind
  const both = run('{"pet": {"kind": "');
  expect(both?.alts?.length).toBe(2);
  expect(run('{"pet": {"kind": "c')?.alts).toBeUndefined();
  // a union that contains itself through $ref compiles and ends its expansion
  const selfish = compileSchema({ type: "object", properties: { a: { $ref: "#/$defs/A" } }, $defs: { A: { anyOf: [{ $ref: "#/$defs/A" }, { type: "null" }] } } });
  expect(stepJsonBytes(jsonStart(selfish), enc.encode('{"a": null}'))?.done).toBe(true);
});
