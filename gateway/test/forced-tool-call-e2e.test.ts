/**
 * A forced tool call (`tool_choice` naming a function) from a real model server: the bundled tiny model, its chat
 * template swapped for a Hermes-style one with tools (the format Qwen's templates use), on the CPU backend. The
 * model knows nothing of tools; JSON mode between the `<tool_call>` tags makes its answer exactly one call of that
 * function with arguments of its schema, which the gateway returns as `tool_calls`.
 */
import { afterAll, expect, test } from "bun:test";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundledModel } from "../../test/support/model-server";
import { CHATML_TOOLS } from "./fakes/test-model";
import { useRealModelServer } from "./real-model-server";

const dir = mkdtempSync(join(tmpdir(), "hermes-model-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const real = useRealModelServer(() => {
  cpSync(bundledModel(), dir, { recursive: true });
  const cfg = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")) as Record<string, unknown>;
  writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ ...cfg, chat_template: CHATML_TOOLS }));
  return ["--model", dir];
});

const tools = [
  {
    type: "function" as const,
    function: {
      name: "set_alarm",
      description: "Set an alarm",
      parameters: { type: "object", properties: { period: { enum: ["am", "pm"] }, loud: { type: "boolean" }, days: { type: "array", items: { enum: ["mon", "tue"] }, maxItems: 2 } }, required: ["period", "loud"] },
    },
  },
  { type: "function" as const, function: { name: "snooze", parameters: { type: "object", properties: {} } } },
];

test("a named tool_choice: one call of that function, arguments of its schema, finish_reason tool_calls", async () => {
  for (const seed of [1, 2, 3]) {
    const r = await real.gw.client.chat.completions.create({
      model: real.model,
      messages: [{ role: "user", content: "Wake me up." }],
      tools,
      tool_choice: { type: "function", function: { name: "set_alarm" } },
      temperature: 1,
      seed,
      max_tokens: 300,
    });
    const ch = r.choices[0]!;
    expect(ch.finish_reason).toBe("tool_calls");
    expect(ch.message.tool_calls!.length).toBe(1);
    const c = ch.message.tool_calls![0]!;
    if (c.type !== "function") throw new Error("a function call");
    expect(c.function.name).toBe("set_alarm");
    const args = JSON.parse(c.function.arguments) as { period: string; loud: boolean; days?: string[] };
    expect(["am", "pm"]).toContain(args.period);
    expect(typeof args.loud).toBe("boolean");
    for (const d of args.days ?? []) expect(["mon", "tue"]).toContain(d);
  }
});

test("tool_choice required: one call of either tool, its arguments of that tool's schema", async () => {
  // snooze takes only {"minutes": 5 | 10} here, so a set_alarm argument under snooze's name would not fit
  const strict = [tools[0]!, { type: "function" as const, function: { name: "snooze", parameters: { type: "object", properties: { minutes: { enum: [5, 10] } }, required: ["minutes"], additionalProperties: false } } }];
  const names = new Set<string>();
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const r = await real.gw.client.chat.completions.create({ model: real.model, messages: [{ role: "user", content: "Wake me up." }], tools: strict, tool_choice: "required", temperature: 1, seed, max_tokens: 300 });
    const ch = r.choices[0]!;
    expect(ch.finish_reason).toBe("tool_calls");
    const c = ch.message.tool_calls![0]!;
    if (c.type !== "function") throw new Error("a function call");
    names.add(c.function.name);
    const args = JSON.parse(c.function.arguments) as Record<string, unknown>;
    if (c.function.name === "snooze") expect(args).toEqual({ minutes: args.minutes }), expect([5, 10]).toContain(args.minutes as number);
    else expect(c.function.name).toBe("set_alarm"), expect(["am", "pm"]).toContain(args.period as string), expect(typeof args.loud).toBe("boolean");
  }
  console.log(`tool_choice required on the bundled model: ${[...names].join(", ")}`);
});
