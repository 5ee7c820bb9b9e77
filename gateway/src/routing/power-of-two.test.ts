import { expect, test } from "bun:test";
import { createPowerOfTwoPolicy } from "./power-of-two";
import { createSeededRand } from "@dispatch/common/src/seeded-rand";
import { backend, request } from "./test-fixtures";

test("power-of-two takes the less loaded of the two it samples", () => {
  const p = createPowerOfTwoPolicy();
  // rand 0.0 picks index 0, then 0.99 picks the last of the remaining.
  const seq = [0, 0.99];
  const rand = () => seq.shift()!;
  const d = p.choose(request(), [backend("a", {}, { running: 9 }), backend("b", {}, { running: 0 }), backend("c", {}, { running: 4 })], rand);
  expect(d.backendId).toBe("c");
});

test("power-of-two never samples the same backend twice and never picks the busiest of three when others are idle", () => {
  const p = createPowerOfTwoPolicy();
  const rand = createSeededRand(11);
  const views = [backend("a", {}, { running: 50 }), backend("b"), backend("c")];
  for (let i = 0; i < 200; i++) expect(p.choose(request(), views, rand).backendId).not.toBe("a");
});

test("power-of-two with one backend returns it", () => {
  expect(createPowerOfTwoPolicy().choose(request(), [backend("x")], createSeededRand(1)).backendId).toBe("x");
});
