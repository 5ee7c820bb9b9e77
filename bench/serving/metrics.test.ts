import { expect, test } from "bun:test";
import { dist, percentile, summarize } from "./metrics";
import { buildWorkload } from "./workload";

test("nearest-rank percentiles", () => {
  const xs = Array.from({ length: 100 }, (_, i) => i + 1);
  expect(percentile(xs, 50)).toBe(50);
  expect(percentile(xs, 99)).toBe(99);
  expect(percentile([7], 99)).toBe(7);
  expect(dist([1, 2, 3, 10]).mean).toBe(4);
});

test("TTFT, TPOT, ITL and throughput from token timings", () => {
  const s = summarize(
    [
      { sentAt: 0, tokenTimes: [100, 110, 120, 130], promptTokens: 5 }, // ttft 100, tpot 10
      { sentAt: 50, tokenTimes: [250, 290], promptTokens: 5 }, // ttft 200, tpot 40
      { sentAt: 60, tokenTimes: [], promptTokens: 5, error: "boom" },
    ],
    2,
  );
  expect(s.completed).toBe(2);
  expect(s.failed).toBe(1);
  expect(s.outputTokens).toBe(6);
  expect(s.outputTokS).toBe(3);
  expect(s.ttftMs.mean).toBe(150);
  expect(s.tpotMs.p50).toBe(10);
  expect(s.tpotMs.max).toBe(40);
  expect(s.itlMs.p50).toBe(10);
  expect(s.itlMs.max).toBe(40);
  expect(s.e2eMs.max).toBe(240);
});

test("workload: seeded ids in range, exact lengths, Poisson arrivals at the asked rate", () => {
  const a = buildWorkload({ numPrompts: 400, inputLen: 16, outputLen: 8, rate: 20, vocab: 1000, lowId: 10, seed: 3 });
  const b = buildWorkload({ numPrompts: 400, inputLen: 16, outputLen: 8, rate: 20, vocab: 1000, lowId: 10, seed: 3 });
  expect(a).toEqual(b);
  expect(a.requests.every((r) => r.prompt.length === 16 && r.prompt.every((t) => t >= 10 && t < 1000))).toBe(true);
  const span = a.requests.at(-1)!.at;
  expect(399 / span).toBeGreaterThan(16); // 20/s within sampling noise
  expect(399 / span).toBeLessThan(25);
  const burst = buildWorkload({ numPrompts: 4, inputLen: 1, outputLen: 1, rate: Infinity, vocab: 10, seed: 1 });
  expect(burst.requests.map((r) => r.at)).toEqual([0, 0, 0, 0]);
  expect(() => buildWorkload({ numPrompts: 1, inputLen: 1, outputLen: 1, rate: 0, vocab: 10, seed: 1 })).toThrow("rate");
});
