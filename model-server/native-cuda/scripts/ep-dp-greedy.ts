/**
 * GPU check of the serving path of expert parallelism (parallel/cuda-ep-runner.ts: attention data
 * parallel, each rank its own sequences and KV, experts split over the GPUs) against EP=1 (one
 * GPU, the ordinary runner): greedy tokens on the golden fixtures and on the full deepseek-moe-16b
 * shape with random weights, then decode tokens/s at batch 1 and 64.
 *
 * Per fixture: 3 prompts batched (KV pools 0, 1, 0: ranks 0, 1, 0 at EP=2), 32 greedy tokens
 * through forward (logits) and again through forwardSampled (greedy on the GPU, the engine's path);
 * then one prompt alone on rank 1 (rank 0 idle in every step: it only serves its experts). The
 * low-latency exchange takes steps of up to 8 tokens per rank (decode), the high-throughput one the
 * prefills. A prompt may part from EP=1 only at a near tie (EP=1's top-2 gap < --tie), and the sampled
 * ids from the logits path likewise. Anything else exits 1. One JSON line per model, then a summary.
 *
 *   bun model-server/native-cuda/scripts/ep-dp-greedy.ts [--ranks 2] [--tokens 32] [--archs a,b] [--ds 1] [--bench-steps 16]
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createCudaRunner, type GpuSampling } from "../../src/model/cuda-runner";
import type { ModelRunner, StepInput } from "../../src/model/runner";
import { createCudaEpRunner, type CudaEpRunner } from "../../src/parallel/cuda-ep-runner";
import type { Top2 } from "../../src/model/testing/top2";
import { writeRandomModel } from "../../../bench/serving/random-model";
import { compareGreedy, greedyDecode, maxAbsDiff, requireGpus, type Stepper } from "./greedy-compare";

const { values } = parseArgs({
  options: {
    ranks: { type: "string", default: "2" },
    tokens: { type: "string", default: "32" },
    archs: { type: "string", default: "mixtral,qwen2_moe,qwen3_moe,olmoe,deepseek_moe" },
    ds: { type: "string", default: "1" },
    "bench-steps": { type: "string", default: "16" },
    "bench-batches": { type: "string", default: "1,64" },
    tie: { type: "string", default: "0.05" },
  },
});
const STEPS = Number(values.tokens);
const TIE = Number(values.tie);
const BS = 16;
const log = (m: string) => process.stderr.write(`[ep-dp-greedy] ${m}\n`);
const { N } = requireGpus("ep-dp-greedy", values.ranks);

/** Rows of block ids: count prompts rounded up to a multiple of N, so block j of prompt i = j * C + i is in KV pool i mod N (rank i mod N). */
const poolStride = (count: number) => Math.ceil(count / N) * N;
/** Block table of prompt i: every block in pool i mod N (the block manager's rule under EP), ids below per * poolStride(count). */
const tableOf = (count: number, per: number) => (i: number) => Int32Array.from({ length: per }, (_, j) => j * poolStride(count) + i);
const greedyRows = (R: number): GpuSampling[] => Array.from({ length: R }, () => ({ temperature: 0, topK: 0, topP: 1, seed: 0, step: 0 }));
const logitsStepper = (r: ModelRunner): Stepper => (s) => r.forward(s);
/** forwardSampled as a Stepper: a one-hot "logits" row per sequence so greedyDecode can follow the ids (gaps are meaningless). */
const sampledStepper =
  (r: CudaEpRunner, V: number): Stepper =>
  async (s) =>
    (await r.forwardSampled(s, greedyRows(s.seqs.length))).map((o) => {
      const row = new Float32Array(V);
      row[o.ids[0]!] = 1;
      return row;
    });
const idsOf = (tops: Top2[][]) => tops.map((t) => t.map((x) => ({ best: x.best, second: -1, gap: Infinity })));

/** Greedy equality of the EP runner against EP=1 on the same prompts: logits path, sampled path, one prompt alone on rank 1. */
async function checkGreedy(one: ModelRunner, ep: CudaEpRunner, V: number, prompts: Int32Array[], per: number) {
  const count = prompts.length;
  const ref = await greedyDecode(logitsStepper(one), prompts, STEPS, tableOf(count, per));
  const dp = await greedyDecode(logitsStepper(ep), prompts, STEPS, tableOf(count, per));
  const cmp = compareGreedy(ref.tops, dp.tops, TIE);
  const sampled = await greedyDecode(sampledStepper(ep, V), prompts, STEPS, tableOf(count, per));
  // the sampled ids against the same runner's logits path: they may part only at that path's near ties
  const sampledCmp = compareGreedy(dp.tops, idsOf(sampled.tops), TIE);
  // prompt 1 alone: rank 1 steps it, rank 0 is idle (serves its experts only)
  const aloneRef = await greedyDecode(logitsStepper(one), [prompts[1]!], STEPS, (i) => tableOf(count, per)(i + 1));
  const alone = await greedyDecode(logitsStepper(ep), [prompts[1]!], STEPS, (i) => tableOf(count, per)(i + 1));
  const aloneCmp = compareGreedy(aloneRef.tops, alone.tops, TIE);
  // a mixed step (engine: penalties / top-logprobs beside device-sampled rows): host rows return
  // their logits, which must be the logits path's for the same step
  const tables = prompts.map((_, i) => tableOf(count, per)(i));
  const prefill: StepInput = { seqs: prompts.map((p, i) => ({ tokens: p, startPos: 0, blockTable: tables[i]!, numLogits: 1 })) };
  const viaLogits = await ep.forward(prefill);
  const mixedRows = await ep.forwardSampled(prefill, prompts.map((_, i) => (i % 2 === 0 ? { ...greedyRows(1)[0]!, host: true } : greedyRows(1)[0]!)));
  let hostRowsMaxDiff = 0;
  let hostRowsOk = true;
  mixedRows.forEach((o, i) => {
    if (i % 2 !== 0) return void (hostRowsOk &&= !o.logits && o.ids.length === 1);
    if (!o.logits || o.logits.length !== viaLogits[i]!.length) return void (hostRowsOk = false);
    o.logits.forEach((v, j) => (hostRowsMaxDiff = Math.max(hostRowsMaxDiff, Math.abs(v - viaLogits[i]![j]!))));
  });
  hostRowsOk &&= hostRowsMaxDiff < 1e-3;
  const ok = cmp.ok && sampledCmp.ok && aloneCmp.ok && hostRowsOk;
  return { ok, hostRows: { ok: hostRowsOk, maxAbsLogitDiff: hostRowsMaxDiff }, prompts: cmp.rows, sampledVsLogits: sampledCmp.rows, aloneOnRank1: aloneCmp.rows, prefillMaxAbsLogitDiff: +maxAbsDiff(ref.first, dp.first).toExponential(2), tops: dp.tops };
}

let failed = false;
const FIXTURES = join(import.meta.dir, "..", "..", "fixtures", "golden");
for (const arch of values.archs!.split(",").filter(Boolean)) {
  const dir = join(FIXTURES, arch);
  let one: ModelRunner | null = null;
  let ep: CudaEpRunner | null = null;
  try {
    const cases: { prompt: number[]; greedy: number[] }[] = JSON.parse(readFileSync(join(dir, "golden.json"), "utf8")).cases;
    const prompts = cases.map((c) => Int32Array.from(c.prompt));
    const per = Math.ceil((Math.max(...prompts.map((p) => p.length)) + STEPS) / BS);
    const blocks = per * poolStride(prompts.length);
    one = await createCudaRunner({ dir, graphMaxBatch: 0 });
    one.allocateKv(blocks, BS);
    ep = await createCudaEpRunner({ dir, ranks: N, lowLatencyMaxTokens: 8, maxTokensPerRank: 4096 });
    ep.allocateKv(blocks, BS);
    const r = await checkGreedy(one, ep, ep.config.vocabSize, prompts, per);
    const fixtureAgree = cases.map((c, i) => {
      let k = 0;
      while (k < Math.min(STEPS, c.greedy.length) && c.greedy[k] === r.tops[i]![k]!.best) k++;
      return k;
    });
    const perRank = ep.tokensPerRank();
    const ok = r.ok && perRank.every((t) => t > 0);
    if (!ok) failed = true;
    console.log(JSON.stringify({ model: arch, ranks: N, tokens: STEPS, ok, tokensPerRank: perRank, graphsCaptured: ep.graphsCaptured(), hostRows: r.hostRows, prefillMaxAbsLogitDiff: r.prefillMaxAbsLogitDiff, prompts: r.prompts, sampledVsLogits: r.sampledVsLogits, aloneOnRank1: r.aloneOnRank1, epVsFixtureFp32: fixtureAgree }));
  } catch (e) {
    failed = true;
    console.log(JSON.stringify({ model: arch, ok: false, error: e instanceof Error ? (e.stack ?? e.message) : String(e) }));
  } finally {
    ep?.close();
    one?.close();
  }
}

// The full deepseek-moe-16b shape, random weights generated on every GPU with the same seed.
if (values.ds === "1") {
  const dir = mkdtempSync(join(tmpdir(), "ep-dp-ds-"));
  let one: ModelRunner | null = null;
  let ep: CudaEpRunner | null = null;
  try {
    writeRandomModel("deepseek-moe-16b", dir, { seed: 1 });
    const P = 32;
    const batches = values["bench-batches"]!.split(",").map(Number);
    const maxB = Math.max(...batches, 8);
    const benchSteps = Number(values["bench-steps"]);
    const per = Math.ceil((P + Math.max(STEPS, benchSteps + 1)) / BS);
    const blocks = per * poolStride(maxB);
    log("loading deepseek-moe-16b (random) at EP=1 and EP=" + N);
    const single = await createCudaRunner({ dir });
    one = single;
    single.allocateKv(blocks, BS);
    ep = await createCudaEpRunner({ dir, ranks: N, lowLatencyMaxTokens: 128, maxTokensPerRank: 8192 });
    ep.allocateKv(blocks, BS);
    const V = ep.config.vocabSize;
    const prompt = (s: number) => Int32Array.from({ length: P }, (_, i) => (s * 7919 + i * 104729) % V);
    const r = await checkGreedy(single, ep, V, Array.from({ length: 8 }, (_, s) => prompt(s)), per);
    // decode tokens/s: prefill b prompts, then timed greedy steps sampled on the GPU (both with CUDA graphs unless DISPATCH_CUDA_EP_GRAPHS=0)
    const decode: Record<string, { ep1: number; epN: number }> = {};
    for (const b of batches) {
      const tables = Array.from({ length: b }, (_, s) => tableOf(b, per)(s));
      const seqs = (toks: Int32Array[], pos: number[]): StepInput => ({ seqs: toks.map((t, i) => ({ tokens: t, startPos: pos[i]!, blockTable: tables[i]!, numLogits: 1 })) });
      const timeIt = async (run: (s: StepInput) => Promise<{ ids: Int32Array }[]>) => {
        let last = await run(seqs(tables.map((_, s) => prompt(s)), tables.map(() => 0)));
        const t0 = performance.now();
        for (let s = 0; s < benchSteps; s++) last = await run(seqs(last.map((o) => Int32Array.of(o.ids[0]!)), tables.map(() => P + s)));
        return (b * benchSteps) / ((performance.now() - t0) / 1000);
      };
      const ep1 = await timeIt((s) => single.forwardSampled(s, greedyRows(s.seqs.length)));
      const epN = await timeIt((s) => ep!.forwardSampled(s, greedyRows(s.seqs.length)));
      decode[`batch${b}`] = { ep1: +ep1.toFixed(1), epN: +epN.toFixed(1) };
    }
    if (!r.ok) failed = true;
    console.log(JSON.stringify({ model: "deepseek-moe-16b-random", ranks: N, tokens: STEPS, ok: r.ok, tokensPerRank: ep.tokensPerRank(), graphsCaptured: ep.graphsCaptured(), hostRows: r.hostRows, prefillMaxAbsLogitDiff: r.prefillMaxAbsLogitDiff, prompts: r.prompts, sampledVsLogits: r.sampledVsLogits, aloneOnRank1: r.aloneOnRank1, decodeTokensPerS: decode, note: `EP=1 with CUDA graphs, EP ${process.env.DISPATCH_CUDA_EP_GRAPHS === "0" ? "eager" : "with CUDA graphs"}; prompts of 32 tokens; greedy sampled on the GPU` }));
  } catch (e) {
    failed = true;
    console.log(JSON.stringify({ model: "deepseek-moe-16b-random", ok: false, error: e instanceof Error ? (e.stack ?? e.message) : String(e) }));
  } finally {
    ep?.close();
    one?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
console.log(JSON.stringify({ summary: "EP data-parallel greedy equality", ranks: N, ok: !failed }));
process.exit(failed ? 1 : 0);
