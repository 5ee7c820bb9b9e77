import { describe, expect, test } from "bun:test";
import { rootHash } from "@dispatch/common/src/block-hash";
import { createBlockManager } from "./block-manager";
import { createScheduler, type SchedulePlan, type Scheduler } from "./scheduler";
import { createSequence, type Sequence } from "./sequence";

const B = 4;
const root = rootHash("test-model");
const range = (n: number, offset = 0) => Array.from({ length: n }, (_, i) => i + offset);

function setup(numBlocks: number, maxBatchTokens = 64, maxNumSeqs = 8) {
  const bm = createBlockManager({ numBlocks, blockSize: B });
  const s = createScheduler({ blockManager: bm, maxNumSeqs, maxBatchTokens, rootHash: root });
  return { bm, s };
}

/** What the engine does after a step: commit the KV, append one sampled token per logits row. */
function finishStep(s: Scheduler, plan: SchedulePlan, next = 1000): void {
  for (const c of plan.chunks) {
    s.commit(c.seq, c.start + c.tokens.length - c.numDraft);
    if (c.numLogits > 0) c.seq.tokens.push(next);
  }
}

let ids = 0;
const seq = (prompt: number[], extra: Partial<Parameters<typeof createSequence>[0]> = {}): Sequence =>
  createSequence({ id: ++ids, prompt, ...extra });

describe("scheduler", () => {
  test("prefill then decode; new sequences join the running batch every step", () => {
    const { s } = setup(32);
    const a = seq(range(6));
    s.add(a);
    let plan = s.schedule();
    expect(plan.chunks.map((c) => [c.seq.id, c.start, c.tokens.length, c.numLogits])).toEqual([[a.id, 0, 6, 1]]);
    finishStep(s, plan);
    const b = seq(range(5, 50));
    s.add(b);
    plan = s.schedule();
    // a decodes (1 token at position 6) and b prefills in the same step.
    expect(plan.chunks.map((c) => [c.seq.id, c.start, c.tokens.length, c.numLogits])).toEqual([
      [a.id, 6, 1, 1],
      [b.id, 0, 5, 1],
    ]);
    expect(plan.chunks[0]!.tokens).toEqual([1000]);
    expect(plan.decodeSeqs).toBe(1);
    expect(plan.prefillTokens).toBe(5);
    expect(a.blockTable.length).toBe(2);
  });

  test("chunked prefill respects the token budget and asks logits only for the last chunk", () => {
    const { s } = setup(32, 8);
    const a = seq(range(20));
    s.add(a);
    const seen: [number, number, number][] = [];
    for (let i = 0; i < 3; i++) {
      const plan = s.schedule();
      for (const c of plan.chunks) seen.push([c.start, c.tokens.length, c.numLogits]);
      expect(plan.chunks.reduce((n, c) => n + c.tokens.length, 0)).toBeLessThanOrEqual(8);
      finishStep(s, plan);
    }
    expect(seen).toEqual([
      [0, 8, 0],
      [8, 8, 0],
      [16, 4, 1],
    ]);
    expect(a.tokens.length).toBe(21);
  });

  test("fairness: decodes go first, a long prompt cannot starve them, and leftover budget admits waiting work", () => {
    const { s } = setup(64, 10);
    const a = seq(range(3));
    const b = seq(range(3, 10));
    s.add(a);
    s.add(b);
    finishStep(s, s.schedule());
    const long = seq(range(60, 100));
    const late = seq(range(5, 200));
    s.add(long);
    s.add(late);
    for (let step = 0; step < 6; step++) {
      const plan = s.schedule();
      // Both decoders run every step, first.
      expect(plan.chunks.slice(0, 2).map((c) => c.seq.id)).toEqual([a.id, b.id]);
      expect(plan.decodeSeqs).toBe(2);
      expect(plan.prefillTokens).toBeLessThanOrEqual(8);
      finishStep(s, plan);
    }
    // The long prompt got the whole prefill share (FCFS), 6 x 8 = 48 of 60 tokens.
    expect(long.numComputed).toBe(48);
    expect(late.status).toBe("waiting");
  });

  test("reuses a cached prefix on admission, never the block holding the last prompt token", () => {
    const { s, bm } = setup(32);
    const a = seq(range(12));
    s.add(a);
    finishStep(s, s.schedule());
    s.finish(a);
    expect(bm.stats().cached).toBe(3);

    const b = seq(range(12)); // the same prompt: all 3 blocks cached, the last is recomputed
    s.add(b);
    let plan = s.schedule();
    expect(plan.chunks[0]!.start).toBe(8);
    expect(b.cachedPromptTokens).toBe(8);

    const c = seq([...range(8), 7, 7, 7, 7, 7]); // shares 2 blocks
    s.add(c);
    finishStep(s, plan);
    plan = s.schedule();
    const cc = plan.chunks.find((x) => x.seq === c)!;
    expect(cc.start).toBe(8);
    expect(c.blockTable.slice(0, 2)).toEqual(b.blockTable.slice(0, 2));
  });

  test("preempts the newest running sequence when blocks run out, then recovers it", () => {
    // 4 blocks of 4 tokens: two sequences of 8 tokens hold 2 blocks each.
    const { s, bm } = setup(4);
    const a = seq(range(8), { stop: { maxTokens: 8 } });
    const b = seq(range(8, 40), { stop: { maxTokens: 8 } });
    s.add(a);
    s.add(b);
    finishStep(s, s.schedule()); // both at 9 tokens, 8 computed, 2 blocks each
    expect(bm.stats().used).toBe(4);
    const plan = s.schedule(); // a needs a 3rd block: b gives way
    expect(plan.preempted).toEqual([b]);
    expect(plan.chunks.map((c) => c.seq)).toEqual([a]);
    expect(b.status).toBe("waiting");
    expect(b.numComputed).toBe(0);
    expect(s.waiting[0]).toBe(b);
    finishStep(s, plan);

    // a finishes; b is readmitted and recomputes its 9 tokens (prompt + 1 generated). Its tail block
    // was evicted to make room for a (released first, least recent); its head is reused from the cache.
    s.finish(a);
    const again = s.schedule();
    const cb = again.chunks.find((c) => c.seq === b)!;
    expect(cb.start).toBe(4);
    expect(cb.tokens).toEqual([44, 45, 46, 47, 1000]);
    expect(cb.numLogits).toBe(1);
    expect(b.preemptions).toBe(1);
  });

  test("priority: lower values are admitted first (FIFO among equals) and preempted last", () => {
    const { s } = setup(64, 64, 1);
    const first = seq(range(4));
    s.add(first);
    finishStep(s, s.schedule()); // first runs alone (one batch slot)
    const low = seq(range(4, 10), { priority: 5 });
    const mid1 = seq(range(4, 20));
    const high = seq(range(4, 30), { priority: -3 });
    const mid2 = seq(range(4, 40));
    for (const x of [low, mid1, high, mid2]) s.add(x);
    expect(s.waiting).toEqual([high, mid1, mid2, low]);
    s.finish(first);
    expect(s.schedule().chunks.map((c) => c.seq)).toEqual([high]);

    // KV pressure: the running sequence of the lowest priority gives way, though it was not admitted last
    const k = setup(4);
    const background = seq(range(8), { priority: 10, stop: { maxTokens: 8 } });
    const urgent = seq(range(8, 40), { priority: 0, stop: { maxTokens: 8 } });
    k.s.add(background);
    k.s.add(urgent);
    expect(k.s.waiting).toEqual([urgent, background]);
    finishStep(k.s, k.s.schedule()); // both prefilled: 2 blocks each, all 4 used
    const plan = k.s.schedule(); // urgent needs a 3rd block
    expect(plan.preempted).toEqual([background]);
    // back in line at the front of its priority, behind any waiting sequence of a higher one
    const later = seq(range(8, 60), { priority: 1 });
    k.s.add(later);
    expect(k.s.waiting).toEqual([later, background]);

    // the low-priority sequence asks for a block first (admitted first): it gives way itself
    const m = setup(4);
    const bg = seq(range(7), { priority: 10, stop: { maxTokens: 8 } });
    m.s.add(bg);
    finishStep(m.s, m.s.schedule()); // bg: 8 tokens, 2 blocks
    const fg = seq(range(8, 40), { stop: { maxTokens: 8 } });
    m.s.add(fg);
    finishStep(m.s, m.s.schedule()); // fg prefilled beside bg's decode: all 4 blocks used, both at 9 tokens
    expect(m.s.running).toEqual([bg, fg]);
    const p2 = m.s.schedule();
    expect(p2.preempted).toEqual([bg]);
    expect(p2.chunks.map((c) => c.seq)).toEqual([fg]);
  });

  test("a sequence that cannot grow and has nobody to preempt gives way itself, never crashes", () => {
    const { s } = setup(2);
    const a = seq(range(8));
    s.add(a);
    finishStep(s, s.schedule()); // 8 computed? no: 8 tokens, all computed; 9th token pending needs block 3
    const plan = s.schedule();
    expect(plan.preempted).toEqual([a]);
    expect(plan.chunks).toEqual([]);
    expect(a.status).toBe("waiting");
  });

  test("admission is bounded by maxNumSeqs and by free blocks (head of line waits)", () => {
    const { s } = setup(3, 64, 2);
    const x = seq(range(4));
    const y = seq(range(4, 10));
    const z = seq(range(4, 20));
    s.add(x);
    s.add(y);
    s.add(z);
    const plan = s.schedule();
    expect(plan.chunks.map((c) => c.seq)).toEqual([x, y]);
    expect(s.waiting).toEqual([z]);
  });

  test("verify step: 1 + k tokens with k + 1 logits; rejected tail blocks are freed on commit", () => {
    const { s, bm } = setup(16);
    const a = seq(range(4));
    s.add(a);
    finishStep(s, s.schedule());
    expect(a.tokens.length).toBe(5);
    a.draft = [7, 8, 9, 10];
    const plan = s.schedule();
    const c = plan.chunks[0]!;
    expect(c.tokens).toEqual([1000, 7, 8, 9, 10]);
    expect(c.numLogits).toBe(5);
    expect(c.numDraft).toBe(4);
    expect(a.blockTable.length).toBe(3); // positions 0..8
    // One draft accepted: positions 4 and 5 valid.
    a.tokens.push(7, 1001);
    a.draft = [];
    s.commit(a, 6);
    expect(a.blockTable.length).toBe(2);
    expect(bm.stats().used).toBe(2);
  });

  test("finish frees a waiting or running sequence's blocks at once", () => {
    const { s, bm } = setup(8);
    const a = seq(range(10));
    s.add(a);
    s.schedule();
    expect(bm.stats().used).toBe(3);
    s.finish(a);
    expect(bm.stats().used).toBe(0);
    expect(s.running.length).toBe(0);
    expect(s.hasWork()).toBe(false);
  });

  test("queued prefill tokens count running prefills and waiting prompts", () => {
    const { s } = setup(32, 4);
    s.add(seq(range(10)));
    s.add(seq(range(6)));
    expect(s.queuedPrefillTokens()).toBe(16);
    s.schedule();
    expect(s.queuedPrefillTokens()).toBe(16); // nothing committed yet
  });

  test("a waiting prompt's cached prefix is not queued prefill work", () => {
    const { s } = setup(32, 64);
    const a = seq(range(10));
    s.add(a);
    finishStep(s, s.schedule()); // a's two full blocks are now cached
    const b = seq([...range(8), 77, 78, 79]); // shares a's first 8 tokens
    s.add(b);
    // a decodes (not prefill work); b waits with 11 tokens of which 8 are cached.
    expect(s.queuedPrefillTokens()).toBe(3);
  });
});
