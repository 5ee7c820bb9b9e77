import { describe, expect, test } from "bun:test";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { GenerateRequestSchema } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { encodeGenerateRequest } from "./generate-request";
import { type GenerateParams, generateRequestMessage } from "./model-client";

const reference = (p: GenerateParams) => toBinary(GenerateRequestSchema, generateRequestMessage(p));

/** Deterministic pseudo-random numbers (xorshift), so a failure reproduces. */
function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 2 ** 32;
  };
}

describe("encodeGenerateRequest", () => {
  test("the bytes protobuf-es writes, over random requests", () => {
    const r = rng(7);
    const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)]!;
    const u32s = [0, 1, 127, 128, 16383, 16384, 2097151, 2097152, 268435455, 268435456, 0xffff_ffff];
    for (let i = 0; i < 2000; i++) {
      const n = Math.floor(r() * 700) + 1;
      const ids = new Uint32Array(n);
      for (let j = 0; j < n; j++) ids[j] = r() < 0.1 ? pick(u32s) : Math.floor(r() * 151936);
      const p: GenerateParams = {
        requestId: pick(["", "cmpl-abc123", "chatcmpl-é✓", "x".repeat(200)]),
        model: pick(["", "qwen3-30b-a3b", "m"]),
        promptTokenIds: ids,
        temperature: pick([undefined, 0, -0, 0.7, 1, 2, 1e-9]),
        topP: pick([undefined, 0, 0.9, 1]),
        topK: pick([undefined, -1, 0, 1, 50, 200000, 0xffff_ffff]),
        seed: pick([undefined, 0, 1, 127, 128, 2 ** 31, 2 ** 32 + 5, 2 ** 53 - 1]),
        frequencyPenalty: pick([undefined, 0, -2, 0.5]),
        presencePenalty: pick([undefined, 0, 2, -0.25]),
        maxTokens: pick([undefined, 1, 16, 300, 0xffff_ffff]),
        minTokens: pick([undefined, 0, 3, 1000]),
        stopTokenIds: pick([[], [0], [151643, 151645], u32s]),
        ignoreEos: pick([undefined, false, true]),
        deadlineUnixMs: pick([undefined, 0, 1_764_000_000_000, 2 ** 53 - 1]),
        topLogprobs: pick([undefined, 0, 1, 20]),
      };
      const got = encodeGenerateRequest(p);
      expect(got).not.toBeNull();
      expect(got!).toEqual(reference(p));
    }
  });

  test("decodes to the same message", () => {
    const p: GenerateParams = { requestId: "cmpl-1", model: "m", promptTokenIds: Uint32Array.from([1, 2, 300]), seed: 42, maxTokens: 16, stopTokenIds: [7], ignoreEos: true, temperature: 0.5 };
    const m = fromBinary(GenerateRequestSchema, encodeGenerateRequest(p)!);
    expect(m.promptTokenIds).toEqual([1, 2, 300]);
    expect(m.sampling?.seed).toBe(42n);
    expect(m.sampling?.temperature).toBeCloseTo(0.5);
    expect(m.stop?.maxTokens).toBe(16);
    expect(m.stop?.stopTokenIds).toEqual([7]);
    expect(m.stop?.ignoreEos).toBe(true);
  });

  test("values it does not take are left to protobuf-es", () => {
    const base: GenerateParams = { requestId: "a", model: "m", promptTokenIds: Uint32Array.from([1]), stopTokenIds: [] };
    expect(encodeGenerateRequest({ ...base, seed: -1 })).toBeNull();
    expect(encodeGenerateRequest({ ...base, maxTokens: 2 ** 32 })).toBeNull();
    expect(encodeGenerateRequest({ ...base, stopTokenIds: [1.5] })).toBeNull();
    expect(encodeGenerateRequest({ ...base, deadlineUnixMs: -5 })).toBeNull();
  });
});
