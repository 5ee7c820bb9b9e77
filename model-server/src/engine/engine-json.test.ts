/**
 * JSON mode through the engine (response_format json_object): over the toy runner, whose logits know nothing of
 * JSON, every output is one JSON object (or, cut by max_tokens, a prefix of one), greedy and sampled, beside an
 * unconstrained sequence in the same batch; on a device-sampling runner the constrained rows are host rows.
 */
import { describe, expect, test } from "bun:test";
import type { ModelRunner } from "../model/runner";
import { createEngine, type GenerateParams } from "./engine";
import { EngineError } from "./errors";
import { JSON_START, stepJsonBytes } from "./json-state";
import { withDeviceSampling } from "./testing/device-sampling-runner";
import { createToyRunner } from "./testing/toy-runner";

// 64 ids: JSON's punctuation, digits, letters, some multi-byte pieces; 63 is EOS
const PIECES = ['{', '}', '[', ']', '"', ':', ',', ' ', '\n', '0', '1', '2', '7', '.', '-', 'e', 'true', 'false', 'null', 'a', 'b', 'c', 'key', 'value', '":', '{"', '"}', '", "', '\\"', '\\n', 'é', 'x', '":"', 'y', '.5', 'tr', 'ue', 'n', 'u', 'l', 'f', 's', 't', 'r', 'd', 'o', 'g', 'h', 'i', 'j', 'k', 'm', 'p', 'q', 'v', 'w', 'z', '  ', '[1', '2]', '{}', '[]', '\t'];
const V = 64;
const EOS = 63;
const enc = new TextEncoder();
const tokenBytes = (id: number) => (id < PIECES.length ? enc.encode(PIECES[id]!) : enc.encode("<eos>"));
const textOf = (ids: number[]) => new TextDecoder().decode(Uint8Array.from(ids.flatMap((id) => [...tokenBytes(id)])));

function engine(runner: ModelRunner = createToyRunner({ vocabSize: V })) {
  return createEngine({ runner, blockSize: 4, numKvBlocks: 512, maxNumSeqs: 8, maxBatchTokens: 64, maxQueue: 64, serverId: "json", tokenBytes, specialTokenIds: [EOS] });
}

async function run(e: ReturnType<typeof engine>, p: GenerateParams): Promise<{ ids: number[]; finish: string | null }> {
  const ids: number[] = [];
  let finish: string | null = null;
  for await (const o of e.generate(p)) {
    ids.push(...o.tokenIds);
    finish = o.finishReason ?? finish;
  }
  return { ids, finish };
}

describe("JSON mode", () => {
  test("greedy and sampled outputs are JSON objects, or prefixes of one when max_tokens cuts them", async () => {
    const e = engine();
    const reqs: GenerateParams[] = [];
    for (let i = 0; i < 24; i++) {
      reqs.push({ promptTokenIds: [i % 60, (i * 7) % 60, 5], responseFormat: "json_object", sampling: i % 3 === 0 ? { temperature: 0 } : { temperature: 1.5, seed: BigInt(i) }, stop: { maxTokens: 300 } });
    }
    const plain: GenerateParams = { promptTokenIds: [1, 2, 3], stop: { maxTokens: 40 } };
    const [free, ...outs] = await Promise.all([run(e, plain), ...reqs.map((r) => run(e, r))]);
    let whole = 0;
    for (const o of outs) {
      const text = textOf(o.ids);
      expect(o.ids).not.toContain(EOS);
      if (o.finish === "stop") {
        whole++;
        const v = JSON.parse(text);
        expect(typeof v === "object" && v !== null && !Array.isArray(v)).toBe(true);
      } else {
        expect(o.finish).toBe("length");
        expect(stepJsonBytes(JSON_START, enc.encode(text))).not.toBeNull();
      }
    }
    expect(whole).toBeGreaterThan(0);
    // the unconstrained sequence in the same batches is untouched
    expect(free.ids.length).toBeGreaterThan(0);
    expect(e.load().kvBlocksUsed).toBe(0);
    await e.close();
  });

  test("json_schema: every answer that ends fits the schema; a schema it cannot enforce is invalid_argument", async () => {
    const e = engine();
    const schema = { type: "object", properties: { key: { enum: ["a", "b"] }, value: { type: "integer" }, t: { type: "boolean" } }, required: ["key", "t"], additionalProperties: false };
    const outs = await Promise.all(
      Array.from({ length: 16 }, (_, i) => run(e, { promptTokenIds: [i, 3, 9], responseFormat: "json_schema", jsonSchema: schema, sampling: i % 4 === 0 ? { temperature: 0 } : { temperature: 1.2, seed: BigInt(i) }, stop: { maxTokens: 200 } })),
    );
    let whole = 0;
    for (const o of outs) {
      if (o.finish !== "stop") continue;
      whole++;
      const v = JSON.parse(textOf(o.ids)) as Record<string, unknown>;
      expect(Object.keys(v).every((k) => ["key", "value", "t"].includes(k))).toBe(true);
      expect(["a", "b"]).toContain(v.key as string);
      expect(typeof v.t).toBe("boolean");
      if ("value" in v) expect(Number.isInteger(v.value)).toBe(true);
    }
    expect(whole).toBeGreaterThan(8);
    expect(() => e.generate({ promptTokenIds: [1], responseFormat: "json_schema", jsonSchema: { type: "object", properties: { a: { type: "string", format: "date" } } } })).toThrow(/format/);
    await e.close();
  });

  test("a vocabulary that cannot continue the output ends the sequence with an error, not a false stop", async () => {
    // the only key is "ky" and no token holds a 'y' here: after {"k nothing may come
    const noY = (id: number) => (PIECES[id] === "y" ? enc.encode("Q") : tokenBytes(id));
    const e = createEngine({ runner: createToyRunner({ vocabSize: V }), blockSize: 4, numKvBlocks: 64, maxNumSeqs: 2, maxBatchTokens: 64, maxQueue: 4, serverId: "no-y", tokenBytes: noY, specialTokenIds: [EOS] });
    const schema = { type: "object", properties: { ky: { type: "boolean" } }, required: ["ky"], additionalProperties: false };
    const o = await run(e, { promptTokenIds: [1, 2], responseFormat: "json_schema", jsonSchema: schema, sampling: { temperature: 0 }, stop: { maxTokens: 200 } });
    expect(o.finish).toBe("error");
    expect(new TextDecoder().decode(Uint8Array.from(o.ids.slice(0, -1).flatMap((id) => [...noY(id)])))).toMatch(/^\{\s*"k$/);
    await e.close();
  });

  test("on a device-sampling runner the constrained rows are host rows, with the same tokens", async () => {
    const p: GenerateParams = { promptTokenIds: [9, 8, 7], responseFormat: "json_object", sampling: { temperature: 0 }, stop: { maxTokens: 60 } };
    const ref = await run(engine(), p);
    const r = withDeviceSampling(createToyRunner({ vocabSize: V }));
    const dev = await run(engine(r), p);
    expect(dev).toEqual(ref);
    expect(r.calls.every((c) => c === "forward")).toBe(true);
  });

  test("each mask computed (not cached) is reported, once per state", async () => {
    const times: number[] = [];
    const e = createEngine({ runner: createToyRunner({ vocabSize: V }), blockSize: 4, numKvBlocks: 64, maxNumSeqs: 2, maxBatchTokens: 64, maxQueue: 4, serverId: "mask", tokenBytes, specialTokenIds: [EOS], onJsonMask: (s) => times.push(s) });
    const p: GenerateParams = { promptTokenIds: [4, 4], responseFormat: "json_object", sampling: { temperature: 0 }, stop: { maxTokens: 40 } };
    const a = await run(e, p);
    const first = times.length;
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(a.ids.length);
    await run(e, p); // the same greedy path: every state's mask is cached now
    expect(times.length).toBe(first);
    expect(times.every((s) => s >= 0 && s < 1)).toBe(true);
    await e.close();
  });

  test("refused: JSON mode with ignore_eos or min_tokens, or without the server's tokenizer", async () => {
    const e = engine();
    for (const stop of [{ ignoreEos: true }, { minTokens: 3 }]) {
      expect(() => e.generate({ promptTokenIds: [1], responseFormat: "json_object", stop })).toThrow(EngineError);
    }
    const bare = createEngine({ runner: createToyRunner({ vocabSize: V }), blockSize: 4, numKvBlocks: 16, maxNumSeqs: 2, maxBatchTokens: 16, maxQueue: 4, serverId: "bare" });
    expect(() => bare.generate({ promptTokenIds: [1], responseFormat: "json_object" })).toThrow(EngineError);
    await e.close();
    await bare.close();
  });
});
