/**
 * The scheduler over a pooled block manager (block-manager.ts `pools`): preemption
 * frees room only in the pool that needs it, and a waiting sequence whose cached
 * prefix sits in a full pool is admitted into another pool instead of waiting.
 */
import { expect, test } from "bun:test";
import { rootHash } from "@dispatch/common/src/block-hash";
import { createBlockManager } from "./block-manager";
import { createScheduler, type SchedulePlan, type Scheduler } from "./scheduler";
import { createSequence } from "./sequence";

const B = 4;
const range = (n: number, offset = 0) => Array.from({ length: n }, (_, i) => i + offset);

function setup() {
  // Two pools of 4 blocks: ids 0, 2, 4, 6 and 1, 3, 5, 7.
  const bm = createBlockManager({ numBlocks: 8, blockSize: B, pools: 2 });
  const s = createScheduler({ blockManager: bm, maxNumSeqs: 8, maxBatchTokens: 64, rootHash: rootHash("test-model") });
  return { bm, s };
}

function finishStep(s: Scheduler, plan: SchedulePlan): void {
  for (const c of plan.chunks) {
    s.commit(c.seq, c.start + c.tokens.length);
    if (c.numLogits > 0) c.seq.tokens.push(1000);
  }
}

test("a sequence short of blocks preempts only sequences of its own pool", () => {
  const { bm, s } = setup();
  // a and c fill pool 0 and need a block at their next decode; b and d (pool 1) do not.
  const [a, b, c, d] = [8, 6, 8, 6].map((n, i) => createSequence({ id: i + 1, prompt: range(n, 100 * i) }));
  for (const q of [a, b, c, d]) s.add(q!);
  let plan = s.schedule();
  expect([a, b, c, d].map((q) => bm.poolOf(q!.blockTable))).toEqual([0, 1, 0, 1]);
  finishStep(s, plan);
  plan = s.schedule();
  // Preempting d (the most recent) would free nothing for a: c gives way.
  expect(plan.preempted).toEqual([c!]);
  expect(plan.chunks.map((ch) => ch.seq)).toEqual([a!, b!, d!]);
  for (const q of [a, b, d]) expect(new Set(q!.blockTable.map((x) => x % 2)).size).toBe(1);
});

test("a cached prefix in a full pool is recomputed in another pool rather than waited for", () => {
  const { bm, s } = setup();
  const a = createSequence({ id: 1, prompt: range(15) }); // 4 blocks: pool 0 full; 3 registered
  s.add(a);
  finishStep(s, s.schedule());
  expect(a.blockTable).toEqual([0, 2, 4, 6]);
  const w = createSequence({ id: 2, prompt: [...range(8), ...range(5, 50)] });
  s.add(w);
  const plan = s.schedule();
  expect(bm.matchPrefix(w.blockHashes)).toBe(2); // its prefix is cached, in pool 0
  expect(plan.preempted).toEqual([]);
  expect(plan.chunks.map((ch) => [ch.seq.id, ch.start, ch.tokens.length])).toEqual([
    [1, 15, 1],
    [2, 0, 13],
  ]);
  expect(w.blockTable).toEqual([1, 3, 5, 7]);
  expect(w.cachedPromptTokens).toBe(0);
});
