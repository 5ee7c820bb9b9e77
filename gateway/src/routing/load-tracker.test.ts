import { describe, expect, test } from "bun:test";
import { createLoadTracker } from "./load-tracker";

const report = (over: Partial<{ running: number; waiting: number; queuedPrefillTokens: number | bigint }> = {}) => ({
  running: 1,
  waiting: 0,
  queuedPrefillTokens: 0,
  kvBlocksUsed: 10,
  kvBlocksTotal: 100,
  ...over,
});

describe("load tracker", () => {
  test("routed requests count as pending until a later report includes them", () => {
    const t = createLoadTracker({ ackLagMs: 10 });
    t.onRouted("r1", "a", 500, 0);
    t.onRouted("r2", "a", 300, 5);
    expect(t.view("a")).toMatchObject({ outstanding: 2, pendingPrefillTokens: 800, pendingRequests: 2 });
    t.onLoad("a", report({ queuedPrefillTokens: 500n }), 12); // r1 is 12 ms old: included; r2 (7 ms) not yet
    const v = t.view("a");
    expect(v).toMatchObject({ outstanding: 2, pendingPrefillTokens: 300, pendingRequests: 1 });
    expect(v.load?.queuedPrefillTokens).toBe(500);
  });

  test("first token settles pending work; finish drops the request", () => {
    const t = createLoadTracker();
    t.onRouted("r1", "a", 500, 0);
    t.onFirstToken("r1");
    expect(t.view("a")).toMatchObject({ outstanding: 1, pendingPrefillTokens: 0, pendingRequests: 0 });
    t.onFinished("r1");
    t.onFinished("r1"); // twice is harmless
    expect(t.view("a")).toMatchObject({ outstanding: 0, pendingPrefillTokens: 0 });
  });

  test("prune drops in-flight requests that never finished", () => {
    const t = createLoadTracker({ maxInFlightMs: 1000 });
    t.onRouted("r1", "a", 100, 0);
    t.prune(500);
    expect(t.view("a").outstanding).toBe(1);
    t.prune(1001);
    expect(t.view("a")).toMatchObject({ outstanding: 0, pendingPrefillTokens: 0 });
  });

  test("removing a backend forgets its requests; unknown backends read as idle", () => {
    const t = createLoadTracker();
    t.onRouted("r1", "a", 100, 0);
    t.removeBackend("a");
    t.onFinished("r1");
    expect(t.view("a")).toEqual({ outstanding: 0, pendingPrefillTokens: 0, pendingRequests: 0 });
  });

  test("zero rates in a report read as unknown", () => {
    const t = createLoadTracker();
    t.onLoad("a", { ...report(), prefillTokensPerS: 0, decodeStepsPerS: 50 }, 0);
    expect(t.view("a").load?.prefillTokensPerS).toBeUndefined();
    expect(t.view("a").load?.decodeStepsPerS).toBe(50);
  });
});
