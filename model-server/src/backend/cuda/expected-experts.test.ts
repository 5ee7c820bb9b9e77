import { describe, expect, test } from "bun:test";
import { expectedDistinctExperts } from "./expected-experts";

describe("expectedDistinctExperts", () => {
  test("uniform: the closed form (one token reads topK, many tokens approach all)", () => {
    expect(expectedDistinctExperts(128, 8, 1)).toBeCloseTo(8, 10);
    expect(expectedDistinctExperts(128, 8, 0)).toBe(0);
    expect(expectedDistinctExperts(128, 8, 64)).toBeCloseTo(128 * (1 - (120 / 128) ** 64), 10);
    expect(expectedDistinctExperts(128, 8, 4096)).toBeLessThanOrEqual(128);
  });

  test("zipf: one token still reads exactly topK experts", () => {
    expect(expectedDistinctExperts(128, 8, 1, { zipf: 1.2 })).toBe(8);
  });

  test("zipf: skew reads fewer distinct experts than uniform, more skew fewer still", () => {
    const uniform = expectedDistinctExperts(128, 8, 64);
    const mild = expectedDistinctExperts(128, 8, 64, { zipf: 0.5 });
    const strong = expectedDistinctExperts(128, 8, 64, { zipf: 2 });
    expect(mild).toBeLessThan(uniform);
    expect(strong).toBeLessThan(mild);
    expect(strong).toBeGreaterThanOrEqual(8);
  });

  test("zipf: the Monte Carlo agrees with the uniform closed form when the bias is negligible", () => {
    const closed = expectedDistinctExperts(64, 6, 16);
    const mc = expectedDistinctExperts(64, 6, 16, { zipf: 1e-9, trials: 400 });
    expect(Math.abs(mc - closed) / closed).toBeLessThan(0.02);
  });

  test("seeded: the same question gets the same estimate", () => {
    expect(expectedDistinctExperts(128, 8, 16, { zipf: 1, trials: 10 })).toBe(expectedDistinctExperts(128, 8, 16, { zipf: 1, trials: 10 }));
  });

  test("refuses topK above numExperts and fractional batches", () => {
    expect(() => expectedDistinctExperts(4, 8, 1)).toThrow("topK");
    expect(() => expectedDistinctExperts(128, 8, 1.5)).toThrow("batch");
  });
});
