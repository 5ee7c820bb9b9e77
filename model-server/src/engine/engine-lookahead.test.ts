/**
 * Overlapped decode steps (lookahead.ts): on a runner that chains sampled steps, the engine launches the next
 * decode step before the one in flight returns. Over the toy runner (which reads every context back from its paged
 * KV through the block tables, so a wrong block, position or token changes the output) wrapped to sample and chain
 * as the CUDA runner does, these pin that nothing a user sees changes: the same tokens as one step at a time, for
 * greedy and seeded sampling, EOS and stop ids, token limits, cancellation, new arrivals, preemption pressure; no
 * block leaked; at most two steps in flight.
 */
import { describe, expect, test } from "bun:test";
import { createEngine, type Engine, type GenerateOutput, type GenerateParams, type StepStats } from "./engine";
import { planLookahead } from "./lookahead";
import { withDeviceSampling, type DeviceSamplingRunner } from "./testing/device-sampling-runner";
import { createToyRunner, toyContinuation } from "./testing/toy-runner";
import type { ScheduledChunk } from "./scheduler";
import { createSequence } from "./sequence";

const V = 64;

function setup(chains: boolean, o: { numKvBlocks?: number; maxNumSeqs?: number; delayMs?: number; lookahead?: boolean } = {}): { engine: Engine; runner: DeviceSamplingRunner; steps: StepStats[] } {
  const runner = withDeviceSampling(createToyRunner({ vocabSize: V, stepDelayMs: o.delayMs ?? 1 }), { chains });
  const steps: StepStats[] = [];
  const engine = createEngine({
    runner,
    blockSize: 4,
    numKvBlocks: o.numKvBlocks ?? 256,
    maxNumSeqs: o.maxNumSeqs ?? 8,
    maxBatchTokens: 64,
    maxQueue: 64,
    serverId: "lookahead-test",
    lookahead: o.lookahead,
    onStep: (s) => steps.push(s),
  });
  return { engine, runner, steps };
}

const range = (n: number, from = 1) => Array.from({ length: n }, (_, i) => from + i);

async function collect(stream: AsyncIterable<GenerateOutput>, onMessage?: (o: GenerateOutput, n: number) => void): Promise<{ tokens: number[]; last: GenerateOutput }> {
  const tokens: number[] = [];
  let last: GenerateOutput | null = null;
  for await (const o of stream) {
    tokens.push(...o.tokenIds);
    last = o;
    onMessage?.(o, tokens.length);
  }
  if (!last) throw new Error("stream ended without a message");
  return { tokens, last };
}

async function runAll(engine: Engine, reqs: GenerateParams[]): Promise<{ tokens: number[]; last: GenerateOutput }[]> {
  const out = await Promise.all(reqs.map((r) => collect(engine.generate(r))));
  return out;
}

const mixed: GenerateParams[] = [
  { promptTokenIds: range(9), stop: { maxTokens: 40, ignoreEos: true } },
  { promptTokenIds: range(5, 3), stop: { maxTokens: 7, ignoreEos: true } },
  { promptTokenIds: range(12, 2), sampling: { temperature: 0.9, topP: 0.95, seed: 77n }, stop: { maxTokens: 33 } },
  { promptTokenIds: range(3, 10), sampling: { temperature: 1.2, topK: 5, seed: 5n }, stop: { maxTokens: 50, stopTokenIds: [17, 23] } },
  { promptTokenIds: range(16, 4), sampling: { temperature: 1, seed: 9n }, stop: { maxTokens: 25, minTokens: 20, stopTokenIds: [3] } },
];

describe("engine: decode steps launched ahead (lookahead.ts)", () => {
  test("greedy: the continuation of one step at a time, with chained steps and at most two in flight", async () => {
    const { engine, runner, steps } = setup(true);
    const r = await collect(engine.generate({ promptTokenIds: range(10), stop: { maxTokens: 30, ignoreEos: true } }));
    expect(r.tokens).toEqual(toyContinuation(range(10), 30, V));
    expect(r.last.finishReason).toBe("length");
    // the prefill step, then decode steps chained one behind the other; the one that would pass the limit is never launched
    expect(runner.chained.calls).toBeGreaterThanOrEqual(27);
    expect(runner.chained.maxInFlight).toBe(2);
    expect(steps.filter((s) => s.lookahead).length).toBe(runner.chained.calls);
    expect(steps.reduce((n, s) => n + s.tokens, 0)).toBe(10 + 29);
    expect(engine.load().kvBlocksUsed).toBe(0);
    await engine.close();
  });

  test("sampled, stop ids, min_tokens, token limits and arrivals: the same tokens and finish reasons as without chaining", async () => {
    const ref = setup(false);
    const want = await runAll(ref.engine, mixed);
    await ref.engine.close();
    expect(ref.runner.chained.calls).toBe(0);
    const { engine, runner } = setup(true);
    // two start together, the rest arrive while decode steps are in flight
    const first = mixed.slice(0, 2).map((p) => collect(engine.generate(p)));
    await new Promise((r) => setTimeout(r, 15));
    const later = mixed.slice(2).map((p) => collect(engine.generate(p)));
    const got = await Promise.all([...first, ...later]);
    expect(got.map((g) => g.tokens)).toEqual(want.map((w) => w.tokens));
    expect(got.map((g) => g.last.finishReason)).toEqual(want.map((w) => w.last.finishReason));
    expect(got.map((g) => g.last.usage)).toEqual(want.map((w) => w.last.usage));
    expect(runner.chained.calls).toBeGreaterThan(20);
    expect(runner.chained.maxInFlight).toBe(2);
    expect(engine.load().kvBlocksUsed).toBe(0);
    await engine.close();
  });

  test("lookahead: false (--sync-decode) keeps one step at a time on a chaining runner", async () => {
    const { engine, runner, steps } = setup(true, { lookahead: false });
    const r = await collect(engine.generate({ promptTokenIds: range(10), stop: { maxTokens: 12, ignoreEos: true } }));
    expect(r.tokens).toEqual(toyContinuation(range(10), 12, V));
    expect(runner.chained.calls).toBe(0);
    expect(runner.chained.maxInFlight).toBe(1);
    expect(steps.some((s) => s.lookahead)).toBe(false);
    await engine.close();
  });

  test("EOS sampled by the step in flight: the token computed ahead for it is dropped and its blocks freed", async () => {
    // The toy model never emits EOS (V - 1) greedily; a stop id on its greedy path ends the sequence at a sampled token.
    const path = toyContinuation(range(6), 40, V);
    const stopAt = 11;
    const p: GenerateParams = { promptTokenIds: range(6), stop: { maxTokens: 40, stopTokenIds: [path[stopAt]!] } };
    const firstHit = path.indexOf(path[stopAt]!);
    const { engine, runner } = setup(true);
    const r = await collect(engine.generate(p));
    expect(r.tokens).toEqual(path.slice(0, firstHit + 1));
    expect(r.last.finishReason).toBe("stop");
    expect(runner.chained.calls).toBeGreaterThanOrEqual(firstHit - 1);
    expect(engine.load().kvBlocksUsed).toBe(0);
    await engine.close();
  });

  test("cancelled while two steps are in flight: the stream ends cancelled and nothing leaks", async () => {
    const { engine, runner } = setup(true, { delayMs: 2 });
    const s = engine.generate({ promptTokenIds: range(8), stop: { maxTokens: 500, ignoreEos: true } });
    const other = collect(engine.generate({ promptTokenIds: range(5, 20), stop: { maxTokens: 60, ignoreEos: true } }));
    const r = await collect(s, (_, n) => {
      if (n === 12) s.cancel();
    });
    expect(r.last.finishReason).toBe("cancelled");
    expect(r.tokens.length).toBeLessThan(20);
    expect(r.tokens).toEqual(toyContinuation(range(8), r.tokens.length, V));
    const o = await other;
    expect(o.tokens).toEqual(toyContinuation(range(5, 20), 60, V));
    expect(runner.chained.calls).toBeGreaterThan(10);
    expect(engine.load().kvBlocksUsed).toBe(0);
    expect(engine.load().running).toBe(0);
    await engine.close();
  });

  test("few KV blocks: lookahead steps only take free blocks; preemption still happens in ordinary steps and outputs stay exact", async () => {
    // 4 sequences of 6 + 30 tokens need 36 blocks of 4; 24 force preemption and recompute
    const reqs = Array.from({ length: 4 }, (_, i): GenerateParams => ({ promptTokenIds: range(6, 1 + 7 * i), stop: { maxTokens: 30, ignoreEos: true } }));
    const { engine, runner } = setup(true, { numKvBlocks: 24 });
    const got = await runAll(engine, reqs);
    got.forEach((g, i) => expect(g.tokens).toEqual(toyContinuation(reqs[i]!.promptTokenIds, 30, V)));
    expect(runner.chained.calls).toBeGreaterThan(0);
    expect(engine.load().kvBlocksUsed).toBe(0);
    await engine.close();
  });
});

describe("planLookahead", () => {
  const seqAt = (id: number, tokens: number, extra: Partial<Parameters<typeof createSequence>[0]> = {}) => {
    const seq = createSequence({ id, requestId: `r${id}`, prompt: range(tokens), stop: { maxTokens: 100 }, ...extra });
    seq.status = "running";
    seq.numComputed = tokens - 1;
    return seq;
  };
  const decode = (seq: ReturnType<typeof seqAt>): ScheduledChunk => ({ seq, start: seq.tokens.length - 1, tokens: [seq.tokens.at(-1)!], numLogits: 1, numDraft: 0 });
  const dev = { temperature: 0, topK: 0, topP: 1, seed: 3, step: 0 };
  const base = { maxLen: 1000, eosTokenIds: [63], nowMs: 0, canAdmit: false };

  test("one chunk per running sequence, chained to its row, sampling one token further", () => {
    const a = seqAt(1, 5);
    const b = seqAt(2, 9);
    const la = planLookahead({ ...base, chunks: [decode(a), decode(b)], sampling: [dev, { ...dev, step: 4 }], running: [a, b] })!;
    expect(la.chunks.map((c) => [c.seq.id, c.start, c.tokens.length, c.numLogits])).toEqual([
      [1, 5, 1, 1],
      [2, 9, 1, 1],
    ]);
    expect(Array.from(la.fromRow)).toEqual([0, 1]);
    expect(la.sampling.map((s) => s.step)).toEqual([1, 5]);
  });

  test("none when a row is host-sampled, a sequence is mid-prefill or not in the step, or a waiting one could be admitted", () => {
    const a = seqAt(1, 5);
    const b = seqAt(2, 9);
    const chunks = [decode(a), decode(b)];
    expect(planLookahead({ ...base, chunks, sampling: [dev, { ...dev, host: true }], running: [a, b] })).toBeNull();
    expect(planLookahead({ ...base, chunks, sampling: null, running: [a, b] })).toBeNull();
    expect(planLookahead({ ...base, chunks: [decode(a)], sampling: [dev], running: [a, b] })).toBeNull();
    expect(planLookahead({ ...base, chunks, sampling: [dev, dev], running: [a, b], canAdmit: true })).toBeNull();
    const mid: ScheduledChunk = { seq: b, start: 0, tokens: range(4), numLogits: 0, numDraft: 0 };
    expect(planLookahead({ ...base, chunks: [decode(a), mid], sampling: [dev, dev], running: [a, b] })).toBeNull();
  });

  test("a sequence the step in flight ends for certain, or past its deadline, is left out; min_tokens bans follow the count", () => {
    const ends = seqAt(1, 5, { stop: { maxTokens: 1 } });
    const late = seqAt(2, 5, { deadlineMs: 10 });
    const min = seqAt(3, 5, { stop: { maxTokens: 100, minTokens: 1 } });
    const la = planLookahead({ ...base, nowMs: 20, chunks: [decode(ends), decode(late), decode(min)], sampling: [dev, dev, dev], running: [ends, late, min] })!;
    expect(la.chunks.map((c) => c.seq.id)).toEqual([3]);
    expect(Array.from(la.fromRow)).toEqual([2]);
    // the token ahead is drawn with one token (the one in flight) already generated: min_tokens 1 bans nothing
    // more, min_tokens 2 still bans EOS (as bannedTokens would once the token in flight is in)
    expect(la.sampling[0]!.banned).toEqual([]);
    const min2 = seqAt(4, 5, { stop: { maxTokens: 100, minTokens: 2 } });
    expect(planLookahead({ ...base, chunks: [decode(min2)], sampling: [dev], running: [min2] })!.sampling[0]!.banned).toEqual([63]);
  });
});
