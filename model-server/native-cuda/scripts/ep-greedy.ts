/**
 * GPU check of expert parallelism in the CUDA backend (native-cuda/src/model_ep.cu): the same
 * model at EP=1 (one GPU, the ordinary step, eager) and at EP=N (one Model per GPU in this process,
 * experts split contiguously, tokens replicated, p2p dispatch/combine), 32 greedy tokens per
 * prompt, all prompts batched. Golden fixtures, then the deepseek-moe-16b shape with random
 * weights (a few layers) for equality and decode tokens/s at batch 1 and 64. One JSON line per
 * model, then a summary line.
 *
 * A prompt may diverge only at a near tie: EP=1's top-2 logit gap at the first differing position
 * below --tie (default 0.05; the layouts group rows differently, so the expert GEMMs and the
 * combine may round differently). Every rank steps the same tokens; a rank's top-1 may differ from
 * rank 0's only at such a near tie too (split-K GEMMs add with fp32 atomics, so the ranks are not
 * bit-identical; `ranks0vsOthers` reports how far apart they were). Anything else exits 1.
 *
 *   bun model-server/native-cuda/scripts/ep-greedy.ts [--ranks 2] [--tokens 32] [--archs a,b] [--ds-layers 4] [--bench-steps 16]
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { toNativeConfig } from "../../src/backend/cuda/native-config";
import { packStep, splitLogits } from "../../src/backend/cuda/pack-step";
import { randomNativeWeights } from "../../src/backend/cuda/random-weights";
import type { ModelConfig } from "../../src/model/config";
import { createCudaRunner, createCudaRunnerOn, type CudaModelRunner } from "../../src/model/cuda-runner";
import type { StepInput } from "../../src/model/runner";
import { modelShape } from "../../../bench/serving/shapes";
import { type Top2, top2 } from "../../src/model/testing/top2";
import { compareGreedy, greedyDecode, maxAbsDiff, requireGpus, type Stepper } from "./greedy-compare";

const { values } = parseArgs({
  options: {
    ranks: { type: "string", default: "2" },
    tokens: { type: "string", default: "32" },
    archs: { type: "string", default: "mixtral,qwen2_moe,qwen3_moe,olmoe,deepseek_moe" },
    "ds-layers": { type: "string", default: "4" },
    "bench-steps": { type: "string", default: "16" },
    "bench-batches": { type: "string", default: "1,64" },
    tie: { type: "string", default: "0.05" },
  },
});
const STEPS = Number(values.tokens);
const TIE = Number(values.tie);
const BS = 16;
const log = (m: string) => process.stderr.write(`[ep-greedy] ${m}\n`);
const { addon, device, N } = requireGpus("ep-greedy", values.ranks);

type Top = Top2;

/** How the EP ranks' outputs compared with rank 0's over a run (every rank steps the same tokens). */
interface RankCheck {
  bitIdentical: boolean;
  maxAbsLogitDiff: number;
  /** Rows whose top-1 differed from rank 0's where rank 0's top-2 gap was >= --tie (a failure). */
  tokenMismatches: number;
  /** The same, at near ties (allowed: split-K GEMMs add with fp32 atomics, so ranks may differ in the last bits). */
  nearTieMismatches: number;
}
const newRankCheck = (): RankCheck => ({ bitIdentical: true, maxAbsLogitDiff: 0, tokenMismatches: 0, nearTieMismatches: 0 });

function epStepper(ranks: CudaModelRunner[], numBlocks: number, stride: number, check: RankCheck): Stepper {
  const c = ranks[0]!.config;
  const V = c.vocabSize;
  const handles = ranks.map((r) => r.handle);
  return async (step) => {
    const p = packStep(step, { blockSize: BS, numBlocks, stride, vocabSize: V, maxContext: c.maxContext });
    const out = await addon.epStep(handles, p.meta, p.T, p.S, p.R);
    if (!out.ranksAgree) check.bitIdentical = false;
    for (const other of out.others) {
      for (let r = 0; r < p.R; r++) {
        const a = out.logits.subarray(r * V, (r + 1) * V);
        const b = other.subarray(r * V, (r + 1) * V);
        for (let i = 0; i < V; i++) check.maxAbsLogitDiff = Math.max(check.maxAbsLogitDiff, Math.abs(a[i]! - b[i]!));
        const ta = top2(a);
        if (ta.best !== top2(b).best) {
          if (ta.gap < TIE) check.nearTieMismatches++;
          else check.tokenMismatches++;
        }
      }
    }
    return splitLogits(out.logits, p.logitCounts, V);
  };
}

const rankSummary = (c: RankCheck) => ({ ...c, maxAbsLogitDiff: +c.maxAbsLogitDiff.toExponential(2) });

const greedy = (step: Stepper, prompts: Int32Array[], n: number, per: number) =>
  greedyDecode(step, prompts, n, (i) => Int32Array.from({ length: per }, (_, j) => i * per + j));
const compare = (ref: Top[][], ep: Top[][]) => compareGreedy(ref, ep, TIE);

/**
 * Loads one model per GPU 0..N-1 (load() creates it on the current device), allocates the same KV
 * on each, then EP over them; returns the ranks and the block-table stride.
 */
async function epGroup(load: () => Promise<CudaModelRunner>, numBlocks: number, maxTokensLl: number): Promise<{ ranks: CudaModelRunner[]; stride: number }> {
  const ranks: CudaModelRunner[] = [];
  let stride = 0;
  for (let d = 0; d < N; d++) {
    addon.setDevice(d);
    const r = await load();
    stride = addon.allocateKv(r.handle, numBlocks, BS);
    ranks.push(r);
  }
  addon.setDevice(0);
  addon.epEnable(ranks.map((r) => r.handle), { maxTokensLl, maxTokensHt: 4096 });
  return { ranks, stride };
}

/** Greedy sampling params for R rows (temperature 0, topK 0, topP 1, seed 0, step 0, no banned ids). */
function greedyParams(R: number): Float64Array {
  const p = new Float64Array(R * 14);
  for (let r = 0; r < R; r++) p[r * 14 + 2] = 1;
  return p;
}

let failed = false;
const archs = values.archs!.split(",").filter(Boolean);
const FIXTURES = join(import.meta.dir, "..", "..", "fixtures", "golden");
for (const arch of archs) {
  const dir = join(FIXTURES, arch);
  const cases: { prompt: number[]; greedy: number[] }[] = JSON.parse(readFileSync(join(dir, "golden.json"), "utf8")).cases;
  const prompts = cases.map((c) => Int32Array.from(c.prompt));
  const per = Math.ceil((Math.max(...prompts.map((p) => p.length)) + STEPS) / BS);
  const blocks = prompts.length * per;
  try {
    addon.setDevice(0);
    const one = await createCudaRunner({ dir, graphMaxBatch: 0 });
    one.allocateKv(blocks, BS);
    const ref = await greedy(async (s) => one.forward(s), prompts, STEPS, per);
    one.close();
    // low-latency up to 8 tokens: prefill takes the high-throughput exchange, decode the low-latency one
    const { ranks, stride } = await epGroup(() => createCudaRunner({ dir, graphMaxBatch: 0 }), blocks, 8);
    const ranksCheck = newRankCheck();
    const ep = await greedy(epStepper(ranks, blocks, stride, ranksCheck), prompts, STEPS, per);
    addon.epRelease(ranks.map((r) => r.handle));
    ranks.forEach((r) => r.close());
    const cmp = compare(ref.tops, ep.tops);
    const fixtureAgree = cases.map((c, i) => {
      let k = 0;
      while (k < Math.min(STEPS, c.greedy.length) && c.greedy[k] === ep.tops[i]![k]!.best) k++;
      return k;
    });
    const ok = cmp.ok && ranksCheck.tokenMismatches === 0;
    if (!ok) failed = true;
    console.log(JSON.stringify({ model: arch, ranks: N, tokens: STEPS, ok, ranks0vsOthers: rankSummary(ranksCheck), prefillMaxAbsLogitDiff: +maxAbsDiff(ref.first, ep.first).toExponential(2), prompts: cmp.rows, epVsFixtureFp32: fixtureAgree }));
  } catch (e) {
    failed = true;
    console.log(JSON.stringify({ model: arch, ok: false, error: e instanceof Error ? e.message : String(e) }));
  }
}

// deepseek-moe-16b shape, random weights generated on each GPU with the same seed (EP keeps each
// rank's slice of the same experts), a few layers.
const dsLayers = Number(values["ds-layers"]);
if (dsLayers > 0) {
  try {
    const config: ModelConfig = modelShape("deepseek-moe-16b", dsLayers);
    const load = async () => {
      const m = addon.createModel(toNativeConfig(config, {}));
      addon.bind(m, randomNativeWeights(addon, m, config, 1));
      return createCudaRunnerOn(config, addon, m, device, 0);
    };
    const P = 32;
    const batches = values["bench-batches"]!.split(",").map(Number);
    const maxB = Math.max(...batches, 8);
    const benchSteps = Number(values["bench-steps"]);
    const per = Math.ceil((P + Math.max(STEPS, benchSteps + 1)) / BS);
    const blocks = maxB * per;
    const prompt = (s: number) => Int32Array.from({ length: P }, (_, i) => (s * 7919 + i * 104729) % config.vocabSize);
    // 8 prompts of 32 tokens: a 256-token prefill (high-throughput exchange), batch-8 decode (low-latency)
    const eqPrompts = Array.from({ length: 8 }, (_, s) => prompt(s));
    addon.setDevice(0);
    const one = await load();
    one.allocateKv(blocks, BS);
    const ref = await greedy(async (s) => one.forward(s), eqPrompts, STEPS, per);
    const { ranks, stride } = await epGroup(load, blocks, 128);
    const ranksCheck = newRankCheck();
    const ep = await greedy(epStepper(ranks, blocks, stride, ranksCheck), eqPrompts, STEPS, per);
    const cmp = compare(ref.tops, ep.tops);
    // decode tokens/s: prefill b prompts, then timed greedy steps sampled on the GPU
    const handles = ranks.map((r) => r.handle);
    const decode: Record<string, { ep1: number; epN: number }> = {};
    let sampledMismatches = 0; // timed steps: rows whose greedy id differed between ranks (no gaps known here)
    for (const b of batches) {
      const tables = Array.from({ length: b }, (_, s) => Int32Array.from({ length: per }, (_, j) => s * per + j));
      const seqs = (toks: Int32Array[], pos: number[]) => ({ seqs: toks.map((t, i) => ({ tokens: t, startPos: pos[i]!, blockTable: tables[i]!, numLogits: 1 })) });
      const timeIt = async (run: (s: StepInput) => Promise<Int32Array>) => {
        let last = await run(seqs(tables.map((_, s) => prompt(s)), tables.map(() => 0)));
        const t0 = performance.now();
        for (let s = 0; s < benchSteps; s++) last = await run(seqs(Array.from(last, (t) => Int32Array.of(t)), tables.map(() => P + s)));
        return (b * benchSteps) / ((performance.now() - t0) / 1000);
      };
      const ep1 = await timeIt(async (s) => {
        const out = await one.forwardSampled(s, s.seqs.map(() => ({ temperature: 0, topK: 0, topP: 1, seed: 0, step: 0 })));
        return Int32Array.from(out, (o) => o.ids[0]!);
      });
      const epN = await timeIt(async (s) => {
        const p = packStep(s, { blockSize: BS, numBlocks: blocks, stride, vocabSize: config.vocabSize, maxContext: config.maxContext });
        const out = await addon.epStep(handles, p.meta, p.T, p.S, p.R, greedyParams(p.R));
        for (const other of out.others) sampledMismatches += other.filter((t, i) => t !== out.ids[i]).length;
        return out.ids;
      });
      decode[`batch${b}`] = { ep1: +ep1.toFixed(1), epN: +epN.toFixed(1) };
    }
    one.close();
    addon.epRelease(handles);
    ranks.forEach((r) => r.close());
    const ok = cmp.ok && ranksCheck.tokenMismatches === 0;
    if (!ok) failed = true;
    console.log(JSON.stringify({ model: `deepseek-moe-16b-random-${dsLayers}layers`, ranks: N, tokens: STEPS, ok, ranks0vsOthers: rankSummary(ranksCheck), timedStepsRankIdMismatches: sampledMismatches, prefillMaxAbsLogitDiff: +maxAbsDiff(ref.first, ep.first).toExponential(2), prompts: cmp.rows, decodeTokensPerS: decode, note: "EP=1 eager (no CUDA graphs) like EP=N; prompts of 32 tokens; greedy sampled on the GPU" }));
  } catch (e) {
    failed = true;
    console.log(JSON.stringify({ model: "deepseek-moe-16b-random", ok: false, error: e instanceof Error ? e.stack ?? e.message : String(e) }));
  }
}
console.log(JSON.stringify({ summary: "EP greedy equality", ranks: N, ok: !failed }));
process.exit(failed ? 1 : 0);
