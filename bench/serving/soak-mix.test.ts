/**
 * The soak's traffic mix: reproducible from the seed, every kind in its share, valid requests
 * inside the model's limits, and each refusal case carrying the status the gateway must answer.
 */
import { expect, test } from "bun:test";
import { createSeededRand } from "@dispatch/common/src/seeded-rand";
import { soakRequest, type SoakMixOptions, type SoakRequest } from "./soak-mix";

const opts = (): SoakMixOptions => ({ model: "m", vocab: 4000, lowId: 10, maxPrompt: 200, maxOutput: 32, contextLen: 1024, seed: 3 });
const draw = (n: number, seed = 5): SoakRequest[] => {
  const rng = createSeededRand(seed);
  const o = opts();
  return Array.from({ length: n }, (_, i) => soakRequest(i, rng, o));
};

test("the same seed gives the same requests; another seed others", () => {
  expect(JSON.stringify(draw(200))).toBe(JSON.stringify(draw(200)));
  expect(JSON.stringify(draw(200, 6))).not.toBe(JSON.stringify(draw(200)));
});

test("every kind comes in its share over 4,000 requests", () => {
  const rs = draw(4000);
  const share = (k: string) => rs.filter((r) => r.kind === k).length / rs.length;
  expect(share("stream")).toBeCloseTo(0.5, 1);
  expect(share("cancel")).toBeCloseTo(0.12, 1);
  expect(share("plain")).toBeCloseTo(0.13, 1);
  expect(share("chat")).toBeCloseTo(0.15, 1);
  expect(share("invalid")).toBeCloseTo(0.1, 1);
  const labels = new Set(rs.flatMap((r) => r.label.split(" ")));
  for (const l of ["prefix", "greedy", "sampled", "penalties", "stop", "stop_ids", "ignore_eos"]) expect(labels).toContain(l);
});

test("valid requests stay inside the limits; ignore_eos without stops asks for exactly max_tokens", () => {
  for (const r of draw(3000).filter((r) => r.kind !== "invalid")) {
    const b = r.body as Record<string, unknown>;
    expect(r.expectStatus).toBe(200);
    expect(r.maxTokens).toBeGreaterThanOrEqual(1);
    expect(r.maxTokens).toBeLessThanOrEqual(32);
    expect(b.max_tokens).toBe(r.maxTokens);
    if (r.kind === "chat") {
      expect(r.path).toBe("/v1/chat/completions");
      expect(r.promptTokens).toBeUndefined();
    } else {
      const p = b.prompt as number[];
      expect(r.promptTokens).toBe(p.length);
      expect(p.length).toBeGreaterThanOrEqual(4);
      expect(p.length).toBeLessThanOrEqual(200);
      expect(p.every((t) => Number.isInteger(t) && t >= 10 && t < 4000)).toBe(true);
    }
    expect(r.exactLength).toBe(b.ignore_eos === true && b.stop === undefined && b.stop_token_ids === undefined);
    if (r.kind === "cancel") {
      expect(r.stream).toBe(true);
      expect(r.cancelAfter).toBeGreaterThanOrEqual(1);
      expect(r.cancelAfter).toBeLessThan(r.maxTokens!);
    } else expect(r.cancelAfter).toBeUndefined();
    expect(b.stream).toBe(r.stream);
    if (r.stream) expect(b.stream_options).toEqual({ include_usage: true });
  }
});

test("prefixed prompts share their first maxPrompt / 4 tokens with other requests", () => {
  const prefixed = draw(2000).filter((r) => r.label.includes("prefix")).map((r) => (r.body as { prompt: number[] }).prompt.slice(0, 50).join(","));
  expect(prefixed.length).toBeGreaterThan(100);
  expect(new Set(prefixed).size).toBeLessThanOrEqual(4);
});

test("each refusal case expects its status: 404 for an unknown model, 400 for the rest", () => {
  const bad = draw(3000).filter((r) => r.kind === "invalid");
  const cases = new Set(bad.map((r) => r.label));
  expect(cases.size).toBe(9);
  for (const r of bad) {
    expect(r.expectStatus).toBe(r.label === "invalid unknown model" ? 404 : 400);
    if (r.label === "invalid not JSON") expect(() => JSON.parse(r.body as string)).toThrow();
    if (r.label === "invalid past the context") expect((r.body as { prompt: number[] }).prompt.length).toBe(1024 + 16);
  }
});

test("options that leave no valid request are refused", () => {
  const rng = createSeededRand(1);
  expect(() => soakRequest(0, rng, { ...opts(), contextLen: 200 })).toThrow(RangeError);
  expect(() => soakRequest(0, rng, { ...opts(), vocab: 10 })).toThrow(RangeError);
});

test("with features, some chat requests go to /v1/responses as input items with the same limits, stored or not", () => {
  const o = { model: "m", vocab: 4000, maxPrompt: 256, maxOutput: 32, contextLen: 1024, seed: 3, features: true };
  const rng = createSeededRand(3);
  const reqs = Array.from({ length: 2000 }, (_, i) => soakRequest(i, rng, o)).filter((r) => r.path === "/v1/responses");
  expect(reqs.length).toBeGreaterThan(20);
  expect(new Set(reqs.map((r) => (r.body as Record<string, unknown>).store))).toEqual(new Set([true, false]));
  for (const r of reqs) {
    const b = r.body as Record<string, unknown>;
    expect(r.kind).toBe("chat");
    expect(Array.isArray(b.input)).toBe(true);
    expect(b.max_output_tokens).toBe(r.maxTokens);
    expect([b.messages, b.max_tokens, b.n, b.stream_options, b.response_format]).toEqual([undefined, undefined, undefined, undefined, undefined]);
  }
});

test("with features, some chat requests go to /v1/messages: system apart, temperature within 0-1, no n", () => {
  const o = { model: "m", vocab: 4000, maxPrompt: 256, maxOutput: 32, contextLen: 1024, seed: 3, features: true };
  const rng = createSeededRand(4);
  const reqs = Array.from({ length: 2000 }, (_, i) => soakRequest(i, rng, o)).filter((r) => r.path === "/v1/messages");
  expect(reqs.length).toBeGreaterThan(20);
  for (const r of reqs) {
    const b = r.body as Record<string, unknown>;
    expect(b.max_tokens).toBe(r.maxTokens);
    expect((b.messages as { role: string }[]).every((m) => m.role === "user")).toBe(true);
    expect(b.temperature === undefined || (b.temperature as number) <= 1).toBe(true);
    expect([b.n, b.ignore_eos, b.seed, b.logprobs]).toEqual([undefined, undefined, undefined, undefined]);
    expect(r.exactLength).toBe(false);
  }
});

test("with features, a Responses request's logit_bias and priority are in the body it sends", () => {
  const o = { model: "m", vocab: 4000, maxPrompt: 256, maxOutput: 32, contextLen: 1024, seed: 3, features: true };
  const rng = createSeededRand(5);
  const reqs = Array.from({ length: 4000 }, (_, i) => soakRequest(i, rng, o)).filter((r) => r.path === "/v1/responses" && / priority=/.test(r.label));
  expect(reqs.length).toBeGreaterThan(0);
  for (const r of reqs) expect(typeof (r.body as Record<string, unknown>).priority).toBe("number");
});
