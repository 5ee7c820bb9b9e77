import { describe, expect, test } from "bun:test";
import { createRouter, NoBackendError, type RoutingUpdate } from "./router";
import { createSeededRand } from "@dispatch/common/src/seeded-rand";

const hashes = (...ns: number[]) => ns.map(BigInt);
const req = (blocks: bigint[], extra: Partial<{ affinityKey: string }> = {}) => ({ blockHashes: blocks, promptTokens: blocks.length * 16 + 3, blockSize: 16, ...extra });
const stored = (...ns: number[]) => ({ event: { case: "stored" as const, value: { blockHashes: hashes(...ns), parentHash: 0n } } });
const evicted = (...ns: number[]) => ({ event: { case: "evicted" as const, value: { blockHashes: hashes(...ns) } } });

function setup(policy = "dispatch") {
  let now = 0;
  const updates: RoutingUpdate[] = [];
  const router = createRouter({ policy, blockSize: 16, rand: createSeededRand(1), now: () => now, onUpdate: (u) => updates.push(u) });
  return { router, updates, tick: (ms: number) => (now += ms) };
}

describe("router", () => {
  test("KV events feed the exact index and steer choices", () => {
    const { router } = setup();
    router.addBackend("a", "exact");
    router.addBackend("b", "exact");
    expect(router.onKvEvents("b", { sequence: 1n, events: [stored(1, 2, 3, 4)] })).toEqual({ resubscribe: false });
    const d = router.choose(req(hashes(1, 2, 3, 4)));
    expect(d).toMatchObject({ backendId: "b", matchedBlocks: 4 });
    router.onKvEvents("b", { sequence: 2n, events: [evicted(1)] });
    expect(router.views(req(hashes(1, 2)))[1]!.matchedBlocks).toBe(0);
  });

  test("views carry how hot the first block each backend lacks is", () => {
    const { router, tick } = setup();
    router.addBackend("a", "exact");
    router.addBackend("b", "exact");
    router.onKvEvents("a", { sequence: 1n, events: [stored(1, 2, 3)] });
    for (let i = 0; i < 10; i++) {
      const r = req(hashes(1, 2, 3, 100 + i));
      router.onRouted(`r${i}`, r, "a");
      tick(100);
    }
    const [a, b] = router.views(req(hashes(1, 2, 3, 999)));
    expect(a!.missedPrefixRate).toBe(0); // holds the deepest match
    // ~10 requests in the last second through block 1 (decayed over 10 s): about 1 per second
    expect(b!.missedPrefixRate).toBeGreaterThan(0.8);
    expect(b!.missedPrefixRate).toBeLessThan(1.1);
  });

  test("dispatch follows a routed, unreported prefix unless it is hot; baselines see reported blocks only", () => {
    const { router, tick } = setup();
    for (const id of ["a", "b", "c", "d"]) router.addBackend(id, "exact");
    // Background traffic on other prefixes, so a new prefix is not the only traffic.
    for (let i = 0; i < 8; i++) {
      router.onRouted(`bg${i}`, req(hashes(500 + i)), "d");
      tick(10);
    }
    const group = (q: number) => req(hashes(1, 2, 3, q));
    router.onRouted("g0", group(10), "b"); // not yet stored on b
    expect(router.views(group(11)).map((v) => v.matchedBlocks)).toEqual([0, 3, 0, 0]);
    // A prefix that carries more than one backend's share of the traffic is hot: pending entries do not count.
    for (let i = 1; i < 12; i++) router.onRouted(`g${i}`, group(10 + i), "b");
    expect(router.views(group(99)).map((v) => v.matchedBlocks)).toEqual([0, 0, 0, 0]);
    router.onKvEvents("b", { sequence: 1n, events: [stored(1, 2, 3)] });
    expect(router.views(group(99)).map((v) => v.matchedBlocks)).toEqual([0, 3, 0, 0]);

    const base = setup("sglang-cache-aware").router;
    base.addBackend("a", "exact");
    base.onRouted("x", group(10), "a");
    expect(base.views(group(11))[0]!.matchedBlocks).toBe(0);
  });

  test("a sequence gap asks for a resubscription; a snapshot replaces the index", () => {
    const { router } = setup();
    router.addBackend("a", "exact");
    router.onKvEvents("a", { sequence: 1n, events: [stored(1)] });
    expect(router.onKvEvents("a", { sequence: 3n, events: [stored(9)] }).resubscribe).toBe(true);
    router.onKvStreamStart("a", true);
    router.onKvEvents("a", { sequence: 1n, snapshot: true, events: [stored(5, 6)] });
    router.onKvEvents("a", { sequence: 2n, snapshot: true, events: [stored(7)] });
    expect(router.onKvEvents("a", { sequence: 3n, events: [] }).resubscribe).toBe(false);
    const v = router.views(req(hashes(1)))[0]!;
    expect(v.matchedBlocks).toBe(0);
    expect(v.cachedBlocks).toBe(3);
    // A new snapshot without onKvStreamStart also replaces what was there.
    router.onKvEvents("a", { sequence: 1n, snapshot: true, events: [stored(1)] });
    expect(router.views(req(hashes(1)))[0]!.cachedBlocks).toBe(1);
    router.onKvEvents("a", { sequence: 2n, events: [{ event: { case: "cleared" } }] });
    expect(router.views(req(hashes(1)))[0]!.cachedBlocks).toBe(0);
    // The RPC client's view shape works the same.
    router.onKvEvents("a", { sequence: 3n, events: [{ kind: "stored", blockHashes: hashes(1, 2) }, { kind: "evicted", blockHashes: hashes(2) }] });
    expect(router.views(req(hashes(1, 2)))[0]!.matchedBlocks).toBe(1);
    router.onKvEvents("a", { sequence: 4n, events: [{ kind: "cleared" }] });
    expect(router.views(req(hashes(1)))[0]!.cachedBlocks).toBe(0);
  });

  test("approximate backends learn from routing; in-flight work shows as pending until reported", () => {
    const { router, updates } = setup();
    router.addBackend("x", "approximate");
    router.addBackend("y", "approximate");
    const r = req(hashes(10, 11, 12));
    const d = router.choose(r);
    router.onRouted("r1", r, d.backendId);
    const view = router.views(r).find((v) => v.id === d.backendId)!;
    expect(view).toMatchObject({ matchedBlocks: 3, outstanding: 1, pendingPrefillTokens: 51, pendingRequests: 1 });
    router.onFirstToken("r1");
    router.onFinished("r1");
    expect(router.views(r).find((v) => v.id === d.backendId)!.outstanding).toBe(0);
    expect(updates.map((u) => u.kind)).toEqual(["routed", "first-token", "finished"]);
  });

  test("load reports reach the views; candidates restrict the choice; no candidate is an error", () => {
    const { router } = setup("least-load");
    router.addBackend("a", "exact");
    router.addBackend("b", "exact");
    router.onLoad("a", { running: 9, waiting: 0, queuedPrefillTokens: 0n, kvBlocksUsed: 0, kvBlocksTotal: 10 });
    expect(router.choose(req(hashes(1))).backendId).toBe("b");
    expect(router.choose(req(hashes(1)), ["a"]).backendId).toBe("a");
    expect(() => router.choose(req(hashes(1)), [])).toThrow(NoBackendError);
  });

  test("remote updates from another replica land in index, load and affinity but are not re-published", () => {
    const { router, updates } = setup();
    router.addBackend("a", "approximate");
    router.addBackend("b", "approximate");
    router.applyRemote({ kind: "routed", requestId: "gw2/r9", backendId: "b", blockHashes: hashes(1, 2), prefillTokens: 35, affinityKey: "u" });
    router.applyRemote({ kind: "routed", requestId: "gw2/r10", backendId: "gone", blockHashes: hashes(1), prefillTokens: 1 });
    const views = router.views(req(hashes(1, 2), { affinityKey: "u" }));
    expect(views[1]).toMatchObject({ id: "b", matchedBlocks: 2, outstanding: 1, affine: true });
    router.applyRemote({ kind: "finished", requestId: "gw2/r9" });
    expect(router.views(req(hashes(1)))[1]!.outstanding).toBe(0);
    expect(updates).toHaveLength(0);
  });

  test("removing a backend forgets it everywhere", () => {
    const { router } = setup();
    router.addBackend("a", "exact");
    router.onKvEvents("a", { sequence: 1n, events: [stored(1)] });
    router.removeBackend("a");
    expect(router.backendIds()).toEqual([]);
    router.addBackend("a", "exact");
    expect(router.views(req(hashes(1)))[0]!.matchedBlocks).toBe(0);
  });

  test("bad configuration fails loudly", () => {
    expect(() => createRouter({ policy: "dispatch", blockSize: 16, pendingHotShare: 0 })).toThrow(RangeError);
    expect(() => createRouter({ policy: "dispatch", blockSize: 16, pendingHotMargin: -1 })).toThrow(RangeError);
    expect(() => createRouter({ policy: "dispatch", blockSize: 0 })).toThrow(RangeError);
    expect(() => createRouter({ policy: "nope", blockSize: 16 })).toThrow(/unknown routing policy/);
  });
});
