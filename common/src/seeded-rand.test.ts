import { expect, test } from "bun:test";
import { createSeededRand } from "./seeded-rand";

test("same seed, same sequence; values in [0, 1)", () => {
  const a = createSeededRand(42);
  const b = createSeededRand(42);
  for (let i = 0; i < 1000; i++) {
    const x = a();
    expect(b()).toBe(x);
    expect(x).toBeGreaterThanOrEqual(0);
    expect(x).toBeLessThan(1);
  }
});

test("pinned mulberry32 values (seeded results elsewhere depend on them)", () => {
  const r = createSeededRand(42);
  expect([r(), r(), r()]).toEqual(PINNED_42);
  expect(createSeededRand(1)()).not.toBe(createSeededRand(2)());
});

// From the gateway's copy before the three were merged into this one.
const PINNED_42 = [0.6011037519201636, 0.44829055899754167, 0.8524657934904099];
