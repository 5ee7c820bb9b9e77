import { describe, expect, test } from "bun:test";
import type { RouteRequest } from "./policy";
import { createRoundRobinPolicy } from "./round-robin";

const req: RouteRequest = { blockHashes: [], promptTokens: 10, blockSize: 16 };
const views = (ids: string[]) => ids.map((id) => ({ id, outstanding: 0 }));

describe("round-robin policy", () => {
  test("cycles through backends in order", () => {
    const p = createRoundRobinPolicy();
    const picks = Array.from({ length: 6 }, () => p.choose(req, views(["a", "b", "c"]), () => 0).backendId);
    expect(picks).toEqual(["a", "b", "c", "a", "b", "c"]);
  });

  test("keeps working when the candidate list shrinks", () => {
    const p = createRoundRobinPolicy();
    p.choose(req, views(["a", "b", "c"]), () => 0);
    p.choose(req, views(["a", "b", "c"]), () => 0);
    expect(["a", "b"]).toContain(p.choose(req, views(["a", "b"]), () => 0).backendId);
    expect(p.choose(req, views(["x"]), () => 0).backendId).toBe("x");
  });

  test("spreads evenly", () => {
    const p = createRoundRobinPolicy();
    const counts: Record<string, number> = {};
    for (let i = 0; i < 300; i++) {
      const id = p.choose(req, views(["a", "b", "c"]), Math.random).backendId;
      counts[id] = (counts[id] ?? 0) + 1;
    }
    expect(counts).toEqual({ a: 100, b: 100, c: 100 });
  });
});
