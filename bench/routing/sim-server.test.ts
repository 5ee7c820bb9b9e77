import { expect, test } from "bun:test";
import { SimServer, type EngineConfig } from "./sim-server";
import type { SimRequest } from "./workload";

const cfg: EngineConfig = { blockSize: 4, kvBlocks: 10, chunkTokens: 8, maxBatch: 4, prefillMsPerToken: 1, stepBaseMs: 2, stepPerSeqMs: 0.5 };
const h = (...ns: number[]) => ns.map(BigInt);
function req(id: number, prompt: bigint[], promptTokens: number, out: number, seqExtra: bigint[] = []): SimRequest {
  return { id, promptTokens, outputTokens: out, promptHashes: prompt, seqHashes: [...prompt, ...seqExtra] };
}

function drain(s: SimServer, now = 0) {
  const first: Array<{ id: number; ttft: number; hit: number }> = [];
  const events: string[] = [];
  for (let i = 0; i < 1000; i++) {
    const ms = s.startIteration();
    if (ms === undefined) break;
    now += ms;
    const r = s.endIteration(now);
    for (const f of r.firstTokens) first.push({ id: f.req.id, ttft: f.ttftMs, hit: f.hitTokens });
    for (const e of r.events) events.push(`${e.case}:${e.value.blockHashes.join(",")}`);
  }
  return { first, events, now };
}

test("chunked prefill timing, stored events, and a prefix hit for the next request", () => {
  const s = new SimServer("s", cfg);
  s.enqueue(req(1, h(1, 2), 9, 2), 0); // 9 tokens: two chunks (8 + 1)
  const a = drain(s);
  // iteration 1: 2 + 8 = 10 ms; iteration 2: 2 + 1 = 3 ms -> first token at 13 ms
  expect(a.first).toEqual([{ id: 1, ttft: 13, hit: 0 }]);
  expect(a.events[0]).toBe("stored:1,2");
  s.enqueue(req(2, h(1, 2), 9, 1), a.now);
  const b = drain(s, a.now);
  expect(b.first).toEqual([{ id: 2, ttft: 3, hit: 8 }]);
  expect(s.hitTokens).toBe(8);
  expect(s.promptTokens).toBe(18);
});

test("LRU eviction makes room and is reported; pinned blocks are never evicted", () => {
  const s = new SimServer("s", cfg);
  s.enqueue(req(1, h(1, 2, 3), 12, 1), 0);
  drain(s);
  s.enqueue(req(2, h(7, 8, 9), 12, 1), 0);
  drain(s);
  // 10 blocks: 1,2,3 cached + (12+1)/4 -> 4 blocks each. A third needs 4 more: evict LRU (1, 2, ...).
  s.enqueue(req(3, h(20, 21, 22, 23), 16, 8), 0);
  const r = drain(s);
  expect(r.events[0]!.startsWith("evicted:1,2")).toBe(true);
  expect(s.cachedPrefix(h(7, 8, 9))).toBe(3);
});

test("load report reflects queue and pinned KV", () => {
  const s = new SimServer("s", cfg);
  s.enqueue(req(1, h(1, 2), 9, 4), 0);
  s.enqueue(req(2, h(5), 5, 4), 0);
  expect(s.load()).toMatchObject({ running: 0, waiting: 2, queuedPrefillTokens: 14 });
  s.startIteration();
  // The 8-token budget admits only the first request: 4 blocks = ceil((9 + 4) / 4).
  expect(s.load()).toMatchObject({ running: 1, waiting: 1, queuedPrefillTokens: 14, kvBlocksUsed: 4 });
  s.endIteration(8);
  s.startIteration();
  expect(s.load()).toMatchObject({ running: 2, waiting: 0, queuedPrefillTokens: 6, kvBlocksUsed: 7 });
});

test("a request larger than the whole cache is an error, not a hang", () => {
  const s = new SimServer("s", cfg);
  s.enqueue(req(1, h(1), 60, 1), 0);
  expect(() => s.startIteration()).toThrow(/more KV/);
});
