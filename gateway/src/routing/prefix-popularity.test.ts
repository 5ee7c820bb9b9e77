import { expect, test } from "bun:test";
import { createPrefixPopularity } from "./prefix-popularity";

test("rate is requests per second through a block, decaying with the window", () => {
  const p = createPrefixPopularity({ windowMs: 1000 });
  for (let t = 0; t < 10_000; t += 100) p.record([1n, 2n], t); // 10 per second through both
  expect(p.rate(1n, 9_900)).toBeGreaterThan(9);
  expect(p.rate(1n, 9_900)).toBeLessThan(11);
  expect(p.rate(3n, 9_900)).toBe(0);
  expect(p.rate(1n, 14_900)).toBeLessThan(0.1); // five windows later
});

test("capacity drops the least recently requested blocks", () => {
  const p = createPrefixPopularity({ capacity: 2 });
  p.record([1n], 0);
  p.record([2n], 1);
  p.record([1n], 2);
  p.record([3n], 3); // evicts 2
  expect(p.size).toBe(2);
  expect(p.rate(2n, 3)).toBe(0);
  expect(p.rate(1n, 3)).toBeGreaterThan(0);
  expect(() => createPrefixPopularity({ windowMs: 0 })).toThrow(RangeError);
});

test("total rate counts every request; one request adds unitRate", () => {
  const p = createPrefixPopularity({ windowMs: 1000 });
  expect(p.unitRate).toBe(1);
  p.record([1n], 0);
  expect(p.totalRate(0)).toBeCloseTo(1, 9);
  for (let t = 0; t < 10_000; t += 100) p.record(t % 200 === 0 ? [1n] : [2n], t); // 10 per second in all
  expect(p.totalRate(9_900)).toBeGreaterThan(9);
  expect(p.totalRate(9_900)).toBeLessThan(11);
  expect(p.rate(1n, 9_900) + p.rate(2n, 9_900)).toBeCloseTo(p.totalRate(9_900), 6);
});

test("a block idle past maxIdleMs is forgotten, so distinct prompts cannot pile up to the capacity", () => {
  const p = createPrefixPopularity({ windowMs: 1000 }); // maxIdleMs 12 s
  p.record([1n, 2n], 0);
  p.record([3n], 5_000);
  p.record([4n], 12_000);
  expect(p.size).toBe(4); // 1 and 2 are exactly 12 s idle: kept
  expect(p.rate(1n, 12_000)).toBeGreaterThan(0);
  expect(p.rate(1n, 12_001)).toBe(0); // idle: reads 0 at once
  p.record([5n], 12_500); // the idle are dropped once per window (the last sweep was at 12 s)
  expect(p.size).toBe(5);
  p.record([6n], 13_000);
  expect(p.size).toBe(4); // 3 (8 s idle), 4, 5, 6
  expect(p.rate(3n, 13_000)).toBeGreaterThan(0);
  // a steady stream of prompts that share nothing: ~12 s of them, not all of them
  const q = createPrefixPopularity({ windowMs: 1000 });
  for (let i = 0; i < 10_000; i++) q.record([BigInt(i) * 2n, BigInt(i) * 2n + 1n], i * 10);
  expect(q.size).toBeLessThanOrEqual(2 * 1301); // up to 12 s + one window
  expect(q.size).toBeGreaterThanOrEqual(2 * 1200);
  expect(() => createPrefixPopularity({ maxIdleMs: 0 })).toThrow(RangeError);
});

test("at capacity an evicted block's slot is reused: the counts stay within capacity plus one request", () => {
  const p = createPrefixPopularity({ capacity: 100 });
  for (let i = 0; i < 5_000; i++) p.record([BigInt(3 * i), BigInt(3 * i + 1), BigInt(3 * i + 2)], i);
  expect(p.size).toBe(100);
  expect(p.slotsAllocated).toBeLessThanOrEqual(103);
  p.record([1n], 5_000); // evicted long ago: counted afresh
  expect(p.rate(1n, 5_000)).toBeCloseTo(p.unitRate, 9);
  expect(p.rate(BigInt(3 * 4_999 + 2), 5_000)).toBeGreaterThan(0);
});
