import { expect, test } from "bun:test";
import { createRunPlanner, interleaveOrder, median, summarizeOverhead, type PlannedRun } from "./run-plan";
import { buildWorkload } from "./workload";

test("overhead runs interleave in G D D G blocks: each target leads and follows equally often", () => {
  const g = "gateway";
  const d = "direct-rpc";
  expect(interleaveOrder(1)).toEqual([g, d, d, g]);
  expect(interleaveOrder(2)).toEqual([g, d, d, g, g, d, d, g]);
  expect(interleaveOrder(0)).toEqual([]);
  expect(() => interleaveOrder(-1)).toThrow("blocks");
  const order = interleaveOrder(3);
  let gFirst = 0;
  let dFirst = 0;
  for (let i = 0; i + 1 < order.length; i++) {
    if (order[i] === g && order[i + 1] === d) gFirst++;
    if (order[i] === d && order[i + 1] === g) dFirst++;
  }
  expect(gFirst).toBe(dFirst);
});

test("the device plan: warm-up, main G then D, overhead blocks; every run's prompts are new to the server", () => {
  const plan = createRunPlanner({ inputLen: 512, outputLen: 256 });
  const runs: PlannedRun[] = [];
  for (const c of [1, 4, 16, 64]) {
    const w = plan.warmup(c);
    expect(w).toMatchObject({ phase: "warmup", target: "gateway", concurrency: c, numPrompts: c, outputLen: 16 });
    const main = plan.main(c);
    expect(main.map((r) => `${r.phase}/${r.target}/${r.numPrompts}/${r.outputLen}`)).toEqual([`main/gateway/${Math.max(4, 2 * c)}/256`, `main/direct-rpc/${Math.max(4, 2 * c)}/256`]);
    const blocks = [0, 1].flatMap((b) => plan.overheadBlock(c, b));
    expect(blocks.map((r) => r.target)).toEqual(interleaveOrder(2));
    expect(blocks.every((r) => r.phase === "overhead" && r.numPrompts === Math.max(4, c) && r.outputLen === 16)).toBe(true);
    expect(blocks.map((r) => r.block)).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
    runs.push(w, ...main, ...blocks);
  }
  expect(new Set(runs.map((r) => r.seed)).size).toBe(runs.length);
  // What the prefix cache sees: no 16-token first block (the smallest cacheable unit) repeats
  // among all prompts of all runs, within a run or across runs.
  const firstBlocks = new Set<string>();
  let prompts = 0;
  for (const r of runs) {
    const w = buildWorkload({ numPrompts: r.numPrompts, inputLen: r.inputLen, outputLen: r.outputLen, rate: Infinity, vocab: 151643, lowId: 10, seed: r.seed });
    for (const q of w.requests) firstBlocks.add(q.prompt.slice(0, 16).join(","));
    prompts += w.requests.length;
  }
  expect(prompts).toBeGreaterThan(600);
  expect(firstBlocks.size).toBe(prompts);
  expect(() => createRunPlanner({ inputLen: 0, outputLen: 1 })).toThrow("positive");
  expect(() => plan.warmup(0)).toThrow("concurrency");
});

test("short output never longer than the main output", () => {
  const plan = createRunPlanner({ inputLen: 8, outputLen: 6, shortOutputLen: 16 });
  expect(plan.shortOutputLen).toBe(6);
  expect(plan.warmup(2).outputLen).toBe(6);
});

test("--waves sets the main runs' prompts per concurrency; overhead and warm-up runs keep one wave", () => {
  const plan = createRunPlanner({ inputLen: 512, outputLen: 256, waves: 6 });
  expect(plan.main(64).map((r) => r.numPrompts)).toEqual([384, 384]);
  expect(plan.main(1).map((r) => r.numPrompts)).toEqual([6, 6]);
  expect(plan.warmup(64).numPrompts).toBe(64);
  expect(plan.overheadBlock(64, 0).every((r) => r.numPrompts === 64)).toBe(true);
  expect(createRunPlanner({ inputLen: 8, outputLen: 8 }).main(16)[0]!.numPrompts).toBe(32);
  expect(() => createRunPlanner({ inputLen: 8, outputLen: 8, waves: 0 })).toThrow("waves");
  expect(() => createRunPlanner({ inputLen: 8, outputLen: 8, waves: 1.5 })).toThrow("waves");
});

test("gateway overhead: medians of per-run TTFT p50, added ms and percent, G/D pair ratios", () => {
  const s = summarizeOverhead([
    { target: "gateway", ttftP50Ms: 102 },
    { target: "direct-rpc", ttftP50Ms: 100 },
    { target: "direct-rpc", ttftP50Ms: 98 },
    { target: "gateway", ttftP50Ms: 99 },
    { target: "gateway", ttftP50Ms: 104 },
    { target: "direct-rpc", ttftP50Ms: 101 },
  ]);
  expect(s.runsPerTarget).toBe(3);
  expect(s.gatewayTtftP50Ms).toBe(102);
  expect(s.directTtftP50Ms).toBe(100);
  expect(s.gatewayAddedTtftMs).toBe(2);
  expect(s.gatewayAddedTtftPct).toBe(2);
  expect(s.pairRatios).toEqual([1.02, 1.0102, 1.0297]);
  expect(s.pairRatioMin).toBe(1.0102);
  expect(s.pairRatioMax).toBe(1.0297);
  expect(median([4, 1, 3, 2])).toBe(2.5);
  expect(() => summarizeOverhead([{ target: "gateway", ttftP50Ms: 1 }])).toThrow("as many");
});
