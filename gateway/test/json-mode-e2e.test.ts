/**
 * JSON mode (`response_format: {"type": "json_object"}`) through the gateway from a real model server (the bundled
 * tiny model on the CPU backend), with the official `openai` client: the model knows nothing of JSON, yet every
 * answer that ends by itself is one JSON object, streamed or not, and one cut by max_tokens is the start of one.
 */
import { expect, test } from "bun:test";
import { JSON_START, stepJsonBytes } from "../../model-server/src/engine/json-state";
import { useRealModelServer } from "./real-model-server";

const real = useRealModelServer();

/** Whether `text` is a start of some JSON object (the model server's own recognizer, json-state.ts). */
const isJsonObjectStart = (text: string) => stepJsonBytes(JSON_START, new TextEncoder().encode(text)) !== null;

test("answers are JSON objects, streamed and not", async () => {
  let whole = 0;
  for (let seed = 1; seed <= 8; seed++) {
    const r = await real.gw.client.chat.completions.create({ model: real.model, messages: [{ role: "user", content: "Describe a river as JSON." }], response_format: { type: "json_object" }, temperature: 1, seed, max_tokens: 120 });
    const { content } = r.choices[0]!.message;
    if (r.choices[0]!.finish_reason === "stop") {
      whole++;
      const v = JSON.parse(content!);
      expect(typeof v === "object" && v !== null && !Array.isArray(v)).toBe(true);
    } else {
      expect(r.choices[0]!.finish_reason).toBe("length");
      expect(isJsonObjectStart(content!)).toBe(true);
    }
  }
  console.log(`json mode on the bundled model: ${whole} of 8 answers closed their object within 120 tokens`);
  const stream = await real.gw.client.chat.completions.create({ model: real.model, messages: [{ role: "user", content: "A tree, as JSON." }], response_format: { type: "json_object" }, temperature: 0, max_tokens: 120, stream: true });
  let text = "";
  let finish: string | null = null;
  for await (const c of stream) {
    text += c.choices[0]?.delta.content ?? "";
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  expect(text.startsWith("{")).toBe(true);
  if (finish === "stop") expect(typeof JSON.parse(text)).toBe("object");
  else expect(isJsonObjectStart(text)).toBe(true);
});

test("with logit_bias pushing towards quotes and closing braces, the bundled model closes its objects", async () => {
  const tokenizer = real.gw.gw.pool.profile(real.model)!.tokenizer;
  const id = (s: string) => {
    const ids = tokenizer.encode(s);
    expect(ids.length).toBe(1);
    return ids[0]!;
  };
  const logit_bias = { [id('"')]: 6, [id("}")]: 8, [id(":")]: 4 };
  let whole = 0;
  for (let seed = 1; seed <= 4; seed++) {
    const r = await real.gw.client.chat.completions.create({ model: real.model, messages: [{ role: "user", content: "A river, as JSON." }], response_format: { type: "json_object" }, logit_bias, temperature: 1, seed, max_tokens: 200 });
    const { content } = r.choices[0]!.message;
    if (r.choices[0]!.finish_reason !== "stop") continue;
    whole++;
    expect(typeof JSON.parse(content!)).toBe("object");
  }
  expect(whole).toBeGreaterThan(0);
});

test("json_schema: the answer fits the schema (fixed keys, an enum, booleans, a bounded array)", async () => {
  const schema = {
    type: "object",
    properties: { color: { enum: ["red", "green", "blue"] }, ripe: { type: "boolean" }, flags: { type: "array", items: { type: "boolean" }, maxItems: 3 } },
    required: ["color", "ripe", "flags"],
    additionalProperties: false,
  };
  for (const seed of [1, 2, 3]) {
    const r = await real.gw.client.chat.completions.create({
      model: real.model,
      messages: [{ role: "user", content: "An apple." }],
      response_format: { type: "json_schema", json_schema: { name: "fruit", schema, strict: true } },
      temperature: 1,
      seed,
      max_tokens: 400,
    });
    // fixed keys, bounded values: the object always closes well within 400 tokens
    expect(r.choices[0]!.finish_reason).toBe("stop");
    const v = JSON.parse(r.choices[0]!.message.content!) as { color: string; ripe: boolean; flags: boolean[] };
    expect(Object.keys(v).sort()).toEqual(["color", "flags", "ripe"]);
    expect(["red", "green", "blue"]).toContain(v.color);
    expect(typeof v.ripe).toBe("boolean");
    expect(v.flags.length).toBeLessThanOrEqual(3);
    expect(v.flags.every((f) => typeof f === "boolean")).toBe(true);
  }
});

test("json_schema with a union of object shapes (a pydantic Union): each answer is one of them", async () => {
  const cat = { type: "object", properties: { kind: { const: "cat" }, lives: { enum: [1, 9] } }, required: ["kind", "lives"], additionalProperties: false };
  const dog = { type: "object", properties: { kind: { const: "dog" }, good: { type: "boolean" } }, required: ["kind", "good"], additionalProperties: false };
  const schema = { type: "object", properties: { pet: { anyOf: [cat, dog] } }, required: ["pet"], additionalProperties: false };
  const kinds = new Set<string>();
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const r = await real.gw.client.chat.completions.create({
      model: real.model,
      messages: [{ role: "user", content: "A pet." }],
      response_format: { type: "json_schema", json_schema: { name: "pet", schema, strict: true } },
      temperature: 1,
      seed,
      max_tokens: 400,
    });
    expect(r.choices[0]!.finish_reason).toBe("stop");
    const { pet } = JSON.parse(r.choices[0]!.message.content!) as { pet: Record<string, unknown> };
    kinds.add(pet.kind as string);
    if (pet.kind === "cat") expect(Object.keys(pet).sort()).toEqual(["kind", "lives"]), expect([1, 9]).toContain(pet.lives as number);
    else expect(pet.kind).toBe("dog"), expect(Object.keys(pet).sort()).toEqual(["good", "kind"]), expect(typeof pet.good).toBe("boolean");
  }
  console.log(`union json_schema on the bundled model: kinds ${[...kinds].join(", ")}`);
});

test("a schema JSON mode cannot enforce, and a bad response_format, are 400s", async () => {
  for (const [rf, param] of [
    [{ type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { d: { type: "string", format: "date" } } } } }, null],
    [{ type: "json_schema", json_schema: { name: "x" } }, "response_format.json_schema.schema"],
    [{ type: "yaml" }, "response_format.type"],
    ["json", "response_format"],
  ] as const) {
    const res = await fetch(`${real.gw.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: real.model, messages: [{ role: "user", content: "hi" }], response_format: rf }) });
    expect(res.status).toBe(400);
    const err = ((await res.json()) as { error: { param: string | null; message: string } }).error;
    expect(err.param).toBe(param);
    // the model server's refusal names the keyword
    if (param === null) expect(err.message).toContain("format");
  }
});
