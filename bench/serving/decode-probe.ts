/**
 * Decode throughput of the CUDA runner on a real model shape with random weights, against the
 * weight-read roofline measured in the same process (GPU only):
 *
 *   bun bench/serving/decode-probe.ts --shape qwen3-30b-a3b --batches 1,8,64 --prompt 128 --steps 48
 *
 * For each batch size: one prefill step of `prompt` tokens per sequence, then `steps` decode
 * steps (the first 4 dropped: graph capture, warm-up); reports the median step time through
 * runner.forward() (logits copied to the host included), output tokens/s, and
 * roofline tokens/s = batch * HBM bytes/s / weight bytes one step reads (decodeWeightBytes).
 * --sample gpu (default): greedy on the GPU, the sampled ids fed back (only ids cross PCIe);
 * --sample logits: the logits of every row come back to the host and fixed ids are fed back.
 * --profile: after each batch size, one eager decode step with events between op groups
 *   (GPU ms per group summed over layers; eager, so launch gaps show as well), then one eager
 *   prefill step shaped like the batch's first prefill chunk, profiled the same way.
 * --overlap 0|1|both: 1 launches each decode step before the previous one returns, its tokens chained from that
 *   step's sampled ids on the GPU (what the engine does in a steady decode batch: engine/lookahead.ts); the step time
 *   is then the median time between returns. both: the plain loop, then the overlapped one over the same positions,
 *   one row each, the second with how many of its sampled ids equal the first's (--sample gpu only).
 * --temperature T --top-p P: the decode steps' GPU sampling (default greedy; --sample gpu).
 * --frequency-penalty F --presence-penalty P --top-logprobs K: penalties over each sequence's sampled ids (the
 *   pairs the host has, the chained input token counted on the GPU in overlapped steps) and the top-K log-probabilities,
 *   all on the GPU (--sample gpu; what a step with such requests costs).
 * --int8: routed experts int8 weight-only (quantized on the GPU at load).
 * --zipf S: zipf-skewed expert load (router bias); the roofline counts the distinct experts such
 *   routing is expected to read (model-server/src/backend/cuda/expected-experts.ts).
 * One JSON line per batch size on stdout; progress on stderr.
 */
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { probeCuda } from "../../model-server/src/backend/cuda/native";
import { toNativeConfig } from "../../model-server/src/backend/cuda/native-config";
import { decodeWeightBytes, randomNativeWeights } from "../../model-server/src/backend/cuda/random-weights";
import { createCudaRunnerOn, type GpuSampling } from "../../model-server/src/model/cuda-runner";
import { penaltyPairs } from "../../model-server/src/backend/cuda/pack-step";
import { modelShape } from "./shapes";

const { values } = parseArgs({
  options: {
    shape: { type: "string", default: "qwen3-30b-a3b" },
    layers: { type: "string" },
    batches: { type: "string", default: "1,8,64" },
    prompt: { type: "string", default: "128" },
    steps: { type: "string", default: "48" },
    "block-size": { type: "string", default: "16" },
    "dump-logits": { type: "string" },
    graphs: { type: "string", default: "256" },
    sample: { type: "string", default: "gpu" },
    zipf: { type: "string", default: "0" },
    int8: { type: "boolean", default: false },
    profile: { type: "boolean", default: false },
    overlap: { type: "string", default: "0" },
    temperature: { type: "string", default: "0" },
    "top-p": { type: "string", default: "1" },
    "frequency-penalty": { type: "string", default: "0" },
    "presence-penalty": { type: "string", default: "0" },
    "top-logprobs": { type: "string", default: "0" },
  },
});

const probe = probeCuda();
if (!probe.ok) {
  console.error(`decode-probe: ${probe.reason}`);
  process.exit(2);
}
const addon = probe.addon;
const log = (m: string) => process.stderr.write(`[decode-probe] ${m}\n`);
const config = modelShape(values.shape!, values.layers ? Number(values.layers) : undefined);
const batches = values.batches!.split(",").map(Number);
const P = Number(values.prompt);
const steps = Number(values.steps);
// the first 4 steps are dropped (graph capture, warm-up): the median needs at least one more
if (!Number.isInteger(steps) || steps < 5) throw new Error(`--steps must be an integer of at least 5 (got ${values.steps}): the first 4 steps are warm-up`);
const B = Number(values["block-size"]);

const hbm = addon.measureHbm(2 ** 32, 5);
log(`${probe.device.name}: HBM ${(hbm / 1e12).toFixed(2)} TB/s (4 GiB device-to-device copy, read+write)`);
let t0 = performance.now();
const model = addon.createModel(toNativeConfig(config, { int8Experts: values.int8 }));
addon.bind(model, randomNativeWeights(addon, model, config, 1, { zipf: Number(values.zipf) }));
const runner = createCudaRunnerOn(config, addon, model, probe.device, Number(values.graphs));
log(`${config.modelId}: ${(runner.weightBytes / 1e9).toFixed(1)} GB of random weights generated in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

const maxB = Math.max(...batches);
const perSeq = Math.ceil((P + steps) / B);
runner.allocateKv(maxB * perSeq, B);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

for (const b of batches) {
  const tables = Array.from({ length: b }, (_, s) => Int32Array.from({ length: perSeq }, (_, i) => s * perSeq + i));
  const prompt = (s: number) => Int32Array.from({ length: P }, (_, i) => (s * 7919 + i * 104729) % config.vocabSize);
  t0 = performance.now();
  // prefill in chunks of at most 8192 tokens per step
  const perStep = Math.max(1, Math.floor(8192 / P));
  for (let s0 = 0; s0 < b; s0 += perStep) {
    const seqs = tables.slice(s0, s0 + perStep).map((t, i) => ({ tokens: prompt(s0 + i), startPos: 0, blockTable: t, numLogits: 1 }));
    await runner.forward({ seqs });
  }
  const prefillS = (performance.now() - t0) / 1000;
  const modes = values.overlap === "both" ? [false, true] : [values.overlap === "1"];
  if (modes.includes(true) && values.sample !== "gpu") throw new Error("--overlap needs --sample gpu");
  let firstIds: number[] | null = null;
  for (const overlap of modes) {
    const times: number[] = [];
    const sampledIds: number[] = [];
    let next = tables.map((_, s) => (s * 31) % config.vocabSize);
    // greedy by default; --temperature / --top-p time the sampler's other path (seeded, so runs repeat)
    const base = tables.map((_, s) => ({ temperature: Number(values.temperature), topK: 0, topP: Number(values["top-p"]), seed: 17 + s, step: 0 }));
    const freq = Number(values["frequency-penalty"]);
    const pres = Number(values["presence-penalty"]);
    const topLogprobs = Number(values["top-logprobs"]);
    const counts = tables.map(() => new Map<number, number>());
    const count = (s: number, id: number) => counts[s]!.set(id, (counts[s]!.get(id) ?? 0) + 1);
    // the sampling of a step: with penalties, the counts of the ids returned so far (a chained step's input, the id
    // in flight, counted on the GPU)
    const sampling = (chained: boolean): GpuSampling[] =>
      base.map((g, s) => ({
        ...g,
        ...(topLogprobs > 0 ? { topLogprobs } : {}),
        ...(freq !== 0 || pres !== 0 ? { frequencyPenalty: freq, presencePenalty: pres, penalties: penaltyPairs(counts[s]!), penalizeInput: chained } : {}),
      }));
    if (overlap) {
      // step i + 1 goes out before step i returns; its tokens are step i's sampled ids, read on the GPU
      const chain = Int32Array.from(tables, (_, s) => s);
      const launch = (step: number, chained: boolean) =>
        runner.forwardSampled({ seqs: tables.map((t, s) => ({ tokens: Int32Array.of(chained ? 0 : next[s]!), startPos: P + step, blockTable: t, numLogits: 1 })) }, sampling(chained), chained ? chain : undefined);
      let pending = launch(0, false);
      let last = performance.now();
      for (let step = 0; step < steps; step++) {
        const ahead = step + 1 < steps ? launch(step + 1, true) : null;
        const ids = await pending;
        const now = performance.now();
        times.push(now - last);
        last = now;
        ids.forEach((x, s) => (sampledIds.push(x.ids[0]!), count(s, x.ids[0]!)));
        if (ahead) pending = ahead;
      }
    } else {
      for (let step = 0; step < steps; step++) {
        const seqs = tables.map((t, s) => ({ tokens: Int32Array.of(next[s]!), startPos: P + step, blockTable: t, numLogits: 1 }));
        const ts = performance.now();
        if (values.sample === "gpu" && !(step === 0 && values["dump-logits"])) {
          const ids = await runner.forwardSampled({ seqs }, sampling(false));
          times.push(performance.now() - ts);
          next = ids.map((x) => x.ids[0]!);
          ids.forEach((x, s) => (sampledIds.push(x.ids[0]!), count(s, x.ids[0]!)));
        } else {
          const out = await runner.forward({ seqs });
          times.push(performance.now() - ts);
          if (step === 0 && b === 1 && values["dump-logits"]) writeFileSync(values["dump-logits"], out[0]!);
          next = tables.map((_, s) => (s * 31 + step * 17) % config.vocabSize);
        }
      }
    }
    const stepMs = median(times.slice(4));
    const tokS = (b * 1000) / stepMs;
    const roof = (b * hbm) / decodeWeightBytes(config, b, values.int8 ? 1 : 2, Number(values.zipf));
    const row = {
      shape: values.shape,
      layers: config.numLayers,
      batch: b,
      prompt: P,
      prefillSeconds: +prefillS.toFixed(3),
      prefillTokS: Math.round((b * P) / prefillS),
      decodeStepMs: +stepMs.toFixed(3),
      decodeTokS: Math.round(tokS),
      rooflineTokS: Math.round(roof),
      ofRoofline: +(tokS / roof).toFixed(3),
      hbmTBs: +(hbm / 1e12).toFixed(3),
      weightBytesPerStep: Math.round(decodeWeightBytes(config, b, values.int8 ? 1 : 2, Number(values.zipf))),
      sample: values.sample,
    temperature: Number(values.temperature),
    topP: Number(values["top-p"]),
      frequencyPenalty: freq,
      presencePenalty: pres,
      topLogprobs,
      zipf: Number(values.zipf),
      int8Experts: values.int8,
      graphs: runner.graphsCaptured(),
      device: probe.device.name,
      overlap,
      // FNV-1a of every sampled id in order: runs (or builds) that compute the same bits give the same hash
      idsHash: sampledIds.reduce((h, x) => Math.imul(h ^ x, 16777619) >>> 0, 2166136261).toString(16),
      ...(firstIds && values.sample === "gpu" ? { sameIdsAsPlain: `${sampledIds.filter((x, i) => x === firstIds![i]).length}/${sampledIds.length}` } : {}),
    };
    if (!firstIds) firstIds = sampledIds;
    console.log(JSON.stringify(row));
    if (values.profile) {
      const seqs = tables.map((t, s) => ({ tokens: Int32Array.of(next[s]!), startPos: P + steps - 1, blockTable: t, numLogits: 1 }));
      const t1 = performance.now();
      const groups = runner.profileStep({ seqs });
      const wallMs = performance.now() - t1;
      const gpuMs = Object.values(groups).reduce((a, b) => a + b, 0);
      console.log(JSON.stringify({ profile: values.shape, batch: b, eagerWallMs: +wallMs.toFixed(3), gpuMs: +gpuMs.toFixed(3), groups: Object.fromEntries(Object.entries(groups).map(([k, v]) => [k, +v.toFixed(4)])) }));
      // and one prefill step as the batch's first chunk ran (rewrites the same KV positions)
      const pre = tables.slice(0, perStep).map((t, s) => ({ tokens: prompt(s), startPos: 0, blockTable: t, numLogits: 1 }));
      const pg = runner.profileStep({ seqs: pre });
      const pms = Object.values(pg).reduce((a, b) => a + b, 0);
      console.log(JSON.stringify({ profilePrefill: values.shape, tokens: pre.length * P, gpuMs: +pms.toFixed(3), groups: Object.fromEntries(Object.entries(pg).map(([k, v]) => [k, +v.toFixed(4)])) }));
    }
    log(`batch ${b}${overlap ? " (overlapped)" : ""}: prefill ${row.prefillTokS} tok/s; decode ${stepMs.toFixed(2)} ms/step, ${row.decodeTokS} tok/s = ${(row.ofRoofline * 100).toFixed(1)}% of the ${row.rooflineTokS} tok/s roofline`);
  }
}
runner.close();
