import { describe, expect, test } from "bun:test";
import { createLeastOutstandingPolicy } from "./least-outstanding";
import type { RouteRequest } from "./policy";

const req: RouteRequest = { blockHashes: [], promptTokens: 10, blockSize: 16 };

describe("least-outstanding policy", () => {
  test("picks the backend with the fewest requests in flight", () => {
    const p = createLeastOutstandingPolicy();
    const d = p.choose(req, [{ id: "a", outstanding: 4 }, { id: "b", outstanding: 1 }, { id: "c", outstanding: 2 }], () => 0.5);
    expect(d).toEqual({ backendId: "b", reason: "least-outstanding" });
  });

  test("breaks ties uniformly through rand", () => {
    const p = createLeastOutstandingPolicy();
    const views = [{ id: "a", outstanding: 1 }, { id: "b", outstanding: 0 }, { id: "c", outstanding: 0 }, { id: "d", outstanding: 0 }];
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const counts: Record<string, number> = {};
    for (let i = 0; i < 3000; i++) {
      const id = p.choose(req, views, rand).backendId;
      counts[id] = (counts[id] ?? 0) + 1;
    }
    expect(counts.a).toBeUndefined();
    for (const id of ["b", "c", "d"]) expect(counts[id]!).toBeGreaterThan(800);
  });

  test("is deterministic for a given rand", () => {
    const views = [{ id: "a", outstanding: 0 }, { id: "b", outstanding: 0 }];
    expect(createLeastOutstandingPolicy().choose(req, views, () => 0.99).backendId).toBe("a");
    expect(createLeastOutstandingPolicy().choose(req, views, () => 0.1).backendId).toBe("b");
  });
});
