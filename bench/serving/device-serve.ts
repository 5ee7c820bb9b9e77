/**
 * The serving benchmark on the GPU machine, end to end: a random-weight model directory at a
 * real shape, the model server on the CUDA backend and the gateway in front (both as Bun bundles,
 * since that machine has no node_modules: bench/serving/make-bundles.sh, which bundles this
 * script too), then serve-bench at each concurrency through the gateway and straight to the
 * model server over Connect. Prompts of --input-len random tokens, exactly the asked output
 * length (EOS ignored). Run from the repository root.
 *
 *   bun bench/serving/device-serve.ts --shape qwen3-30b-a3b --concurrency 1,4,16,64 \
 *     --input-len 512 --output-len 256 --out /tmp/serve [--zipf 1.0] [--int8] [--ep 2] [--budget-s 140] [--waves 2]
 *
 * --int8: the model server quantizes the routed experts to int8 weight-only at load
 *   (DISPATCH_CUDA_INT8_EXPERTS=1) and the roofline counts int8 expert bytes.
 * --zipf S: zipf-skewed expert load (the random model's router bias); the roofline counts the
 *   distinct experts that routing is expected to read (expected-experts.ts).
 * --ep N: the model server runs with expert parallelism over N GPUs (--ep N; needs N GPUs).
 * --request-extra JSON: fields added to every request (penalties, logprobs), e.g. '{"logprobs":5,"frequency_penalty":0.5}'.
 * --targets gateway: main runs through the gateway only (no direct runs, no overhead blocks),
 *   for throughput-only runs of other shapes and options; default gateway,direct.
 *
 * Per concurrency c (run-plan.ts; every run sends prompts no earlier run sent, its own seed):
 *   1. warm-up, not measured: one wave of c prompts through the gateway, --short-output-len out
 *      (captures the CUDA graphs of that batch size, grows buffers, opens connections);
 *   2. main: the full workload, --waves x c prompts (default 2c, at least 4), --output-len out, through the gateway
 *      then direct: the rows of the table;
 *   3. gateway overhead: blocks of gateway, direct, direct, gateway runs of max(4, c) prompts
 *      and --short-output-len out (TTFT only; fewer tokens than the main runs to fit the budget),
 *      at least one block, up to --overhead-blocks while the blocks fit in --overhead-s.
 *
 * stdout, one JSON line each: first the weight-read roofline, measured in this process before the
 * server starts (HBM bytes/s from a 4 GiB device copy; per concurrency c, roofline tokens/s =
 * c * HBM bytes/s / the weight bytes one decode step of c sequences reads, decodeWeightBytes);
 * then per run: the warm-up ({phase: "warmup"}), the main runs' serve-bench summaries
 * (no phase field: TTFT, TPOT, ITL, E2E mean/p50/p90/p99 ms, output and total tokens/s,
 * decodeTokS = c * 1000 / TPOT p50 and its share of the roofline), each overhead run
 * ({phase: "overhead"}), then {kind: "gateway-overhead"}: the median TTFT p50 of each target,
 * gatewayAddedTtftMs (gateway - direct), gatewayAddedTtftPct and the G/D pair ratios. Every run
 * line carries cachedPromptTokens: prompt tokens the model server took from its prefix cache
 * during that run (its /metrics), 0 when no run reuses another's prompts. Last, two plain-text
 * tables (main runs; gateway overhead). Logs in --out. A concurrency is not started when 1.5 x
 * the previous one's time would run past --budget-s, nor an overhead block when its expected time
 * would ({kind: "gateway-overhead", skipped: "budget"} when not even one ran); SIGTERM prints the
 * tables so far and stops the servers at once.
 */
import { mkdirSync } from "node:fs";
import { basename, join } from "node:path";
import { parseArgs } from "node:util";
import { probeCuda } from "../../model-server/src/backend/cuda/native";
import { decodeWeightBytes } from "../../model-server/src/backend/cuda/random-weights";
import { writeRandomModel } from "./random-model";
import { formatMainTable, formatOverheadTable, type MainRow, type OverheadRow } from "./report-table";
import { createRunPlanner, overheadPrompts, summarizeOverhead, type OverheadSample, type PlannedRun } from "./run-plan";
import { formatResult, runBench, type BenchResult } from "./serve-bench";
import { promptCounters } from "./server-metrics";
import { killStackOnSignal, stackEntries, startServingStack, type ServingStack } from "./serving-stack";
import { modelShape, ordinaryVocab } from "./shapes";

const { values } = parseArgs({
  options: {
    shape: { type: "string", default: "qwen3-30b-a3b" },
    concurrency: { type: "string", default: "1,4,16,64" },
    "input-len": { type: "string", default: "512" },
    "output-len": { type: "string", default: "256" },
    // KV sizing: the server's own default on CUDA (--kv-gpu-share 0.9) unless one of these is given
    "kv-gpu-share": { type: "string" },
    "kv-memory-mb": { type: "string" },
    "budget-s": { type: "string", default: "0" },
    bundle: { type: "string", default: join(process.cwd(), "model-server", "native-cuda", "build", "bundle") },
    out: { type: "string", default: "/tmp/serve" },
    // local smoke runs: an existing model directory, another backend, the sources instead of bundles
    model: { type: "string" },
    backend: { type: "string", default: "cuda" },
    source: { type: "boolean", default: false },
    vocab: { type: "string" },
    zipf: { type: "string", default: "0" },
    int8: { type: "boolean", default: false },
    // expert parallelism: the model server spreads the experts over this many GPUs (--ep)
    ep: { type: "string", default: "1" },
    targets: { type: "string", default: "gateway,direct" },
    // the gateway-overhead runs: G D D G blocks, at least one, at most --overhead-blocks, more
    // only while this concurrency's overhead runs so far plus one more block fit in --overhead-s
    "overhead-blocks": { type: "string", default: "3" },
    "overhead-s": { type: "string", default: "8" },
    // output tokens of the warm-up and overhead runs (they measure TTFT only)
    "short-output-len": { type: "string", default: "16" },
    // main runs: this many waves of each concurrency's prompts (2c prompts by default)
    waves: { type: "string", default: "2" },
    // fields added to every main-run request, e.g. '{"logprobs":5,"frequency_penalty":0.5}' (sampling extras on the GPU)
    "request-extra": { type: "string" },
  },
});
const requestExtra = values["request-extra"] ? (JSON.parse(values["request-extra"]) as Record<string, unknown>) : undefined;
const ROOT = process.cwd();
const started = performance.now();
const elapsedS = () => (performance.now() - started) / 1000;
const budgetS = Number(values["budget-s"]);
const out = values.out!;
mkdirSync(out, { recursive: true });
const log = (m: string) => process.stderr.write(`[device-serve] ${m}\n`);
const conc = values.concurrency!.split(",").map(Number);
if (conc.some((c) => !Number.isInteger(c) || c < 1)) throw new Error(`--concurrency must be positive integers, got "${values.concurrency}"`);
const maxConc = Math.max(...conc);
const inputLen = Number(values["input-len"]);
const overheadBlocks = Number(values["overhead-blocks"]);
const overheadS = Number(values["overhead-s"]);
if (!Number.isInteger(overheadBlocks) || overheadBlocks < 1) throw new Error(`--overhead-blocks must be a positive integer, got "${values["overhead-blocks"]}"`);
if (!(overheadS >= 0)) throw new Error(`--overhead-s must be a non-negative number, got "${values["overhead-s"]}"`);
const targets = values.targets!.split(",");
if (targets.some((t) => t !== "gateway" && t !== "direct") || !targets.includes("gateway")) throw new Error(`--targets must be gateway or gateway,direct, got "${values.targets}"`);
const withDirect = targets.includes("direct");
const planner = createRunPlanner({ inputLen, outputLen: Number(values["output-len"]), shortOutputLen: Number(values["short-output-len"]), waves: Number(values.waves) });
const mainRows: MainRow[] = [];
const overheadRows: OverheadRow[] = [];
/** The tables after the JSON lines (also on SIGTERM, with what finished). */
function printTables(): void {
  if (mainRows.length) console.log(`\n${formatMainTable(mainRows)}`);
  if (overheadRows.length) console.log(`\ngateway TTFT overhead (median of per-run TTFT p50, runs in G D D G blocks, fresh prompts each, ${overheadRows[0]!.outputLen} tokens out)\n${formatOverheadTable(overheadRows)}`);
}
const modelName = values.model ? basename(values.model) : `${values.shape}-random`;
const ep = Number(values.ep);
if (!Number.isInteger(ep) || ep < 1) throw new Error(`--ep must be a positive integer, got "${values.ep}"`);

// The roofline first, while this process is alone on the GPU (the server's KV takes most of it later).
const roofline = measureRoofline();
console.log(JSON.stringify({ kind: "roofline", model: modelName, ...roofline }));

const dir = values.model ?? join(out, `${values.shape}-random`);
if (!values.model) writeRandomModel(values.shape!, dir, { seed: 1, zipf: Number(values.zipf) });
const { serverMain, gatewayMain } = stackEntries({ source: values.source!, bundle: values.bundle!, root: ROOT });
let stack: ServingStack | undefined;
killStackOnSignal(() => stack, log, printTables);

/** HBM bandwidth (GPU only) and per concurrency the weight-read roofline of the --shape model. */
function measureRoofline(): Record<string, unknown> {
  if (values.backend !== "cuda") return { skipped: `backend ${values.backend}` };
  if (values.model) return { skipped: "--model: the roofline needs the --shape of the random model" };
  const probe = probeCuda();
  if (!probe.ok) return { skipped: probe.reason };
  const hbm = probe.addon.measureHbm(2 ** 32, 5);
  const config = modelShape(values.shape!);
  const perConcurrency = conc.map((c) => {
    const bytes = decodeWeightBytes(config, c, values.int8 ? 1 : 2, Number(values.zipf));
    return { concurrency: c, weightBytesPerStep: Math.round(bytes), stepMs: +((bytes / hbm) * 1000).toFixed(3), rooflineTokS: Math.round((c * hbm) / bytes) };
  });
  log(`${probe.device.name}: HBM ${(hbm / 1e12).toFixed(2)} TB/s; roofline ${perConcurrency.map((r) => `c${r.concurrency} ${r.rooflineTokS} tok/s`).join(", ")}`);
  const epNote = ep > 1 ? `; one GPU's roofline: with --ep ${ep} the server reads the experts from ${ep} GPUs` : "";
  return { device: probe.device.name, hbmTBs: +(hbm / 1e12).toFixed(3), int8Experts: values.int8, zipf: Number(values.zipf), ep, note: (values.zipf === "0" ? "uniform routing" : "zipf routing: expected distinct experts (expected-experts.ts)") + epNote, perConcurrency };
}

const rooflineTokS = (c: number): number | null =>
  (roofline.perConcurrency as { concurrency: number; rooflineTokS: number }[] | undefined)?.find((r) => r.concurrency === c)?.rooflineTokS ?? null;

try {
  const kvArgs = [
    ...(values["kv-gpu-share"] ? ["--kv-gpu-share", values["kv-gpu-share"]] : []),
    ...(values["kv-memory-mb"] ? ["--kv-memory-mb", values["kv-memory-mb"]] : []),
  ];
  const serverEnv: Record<string, string> = values.int8 ? { DISPATCH_CUDA_INT8_EXPERTS: "1" } : {};
  const serverArgs = ["--model", dir, "--backend", values.backend!, "--max-num-seqs", String(maxConc), "--max-batch-tokens", "8192", ...kvArgs, ...(ep > 1 ? ["--ep", String(ep)] : [])];
  stack = await startServingStack({ out, serverMain, gatewayMain, serverArgs, serverEnv, cwd: ROOT, log });
  const { base, msUrl, model } = stack;
  const vocab = values.vocab ? Number(values.vocab) : ordinaryVocab(values.shape!);
  /** One planned run, with the model server's prefix-cache hits during it (0 when every prompt is new). */
  const exec = async (p: PlannedRun) => {
    const before = await promptCounters(msUrl);
    const r = await runBench({ model, requestExtra, numPrompts: p.numPrompts, inputLen: p.inputLen, outputLen: p.outputLen, requestRate: Infinity, maxConcurrency: p.concurrency, vocab, seed: p.seed, ...(p.target === "gateway" ? { baseUrl: base } : { baseUrl: msUrl, target: "rpc" as const }) });
    const after = await promptCounters(msUrl);
    const cachedPromptTokens = after.cachedTokens - before.cachedTokens;
    if (cachedPromptTokens > 0 && p.phase !== "warmup") log(`warning: concurrency ${p.concurrency} ${p.phase} ${p.target} hit ${cachedPromptTokens} cached prompt tokens`);
    return { r, cachedPromptTokens, serverPromptTokens: after.promptTokens - before.promptTokens };
  };
  let lastConcS = 0;
  for (const c of conc) {
    if (budgetS > 0 && elapsedS() + 1.5 * lastConcS > budgetS) {
      log(`concurrency ${c} skipped: ${(budgetS - elapsedS()).toFixed(0)} s of --budget-s left, the last concurrency took ${lastConcS.toFixed(0)} s`);
      console.log(JSON.stringify({ concurrency: c, skipped: "budget" }));
      continue;
    }
    const concStart = performance.now();
    const w = planner.warmup(c);
    const wr = await exec(w);
    console.log(JSON.stringify({ concurrency: c, phase: "warmup", target: w.target, numPrompts: w.numPrompts, outputLen: w.outputLen, seed: w.seed, durationS: +wr.r.summary.durationS.toFixed(3), failed: wr.r.summary.failed, cachedPromptTokens: wr.cachedPromptTokens, errors: wr.r.errors }));
    for (const p of planner.main(c).filter((p) => withDirect || p.target === "gateway")) {
      const m = await exec(p);
      log(`concurrency ${c}, ${p.target}\n${formatResult(m.r)}`);
      // no phase field: readers (chart.ts) take a row with a target and no phase as a main run
      const line = { ...row(c, p.target, m.r), seed: p.seed, cachedPromptTokens: m.cachedPromptTokens, serverPromptTokens: m.serverPromptTokens };
      mainRows.push(line as unknown as MainRow);
      console.log(JSON.stringify(line));
    }
    // G D D G blocks of short runs: at least one, more while this concurrency's overhead time allows
    const samples: OverheadSample[] = [];
    const ovStart = performance.now();
    // a block's time: the last block's, or before the first, four warm-up-sized runs
    let blockS = 4 * wr.r.summary.durationS;
    for (let b = 0; withDirect && b < overheadBlocks; b++) {
      const spent = (performance.now() - ovStart) / 1000;
      if (budgetS > 0 && elapsedS() + blockS > budgetS) break;
      if (b > 0 && spent + blockS > overheadS) break;
      const blockStart = performance.now();
      for (const p of planner.overheadBlock(c, b)) {
        const o = await exec(p);
        const s = o.r.summary;
        samples.push({ target: p.target, ttftP50Ms: s.ttftMs.p50 });
        console.log(JSON.stringify({ concurrency: c, phase: "overhead", block: b, target: p.target, numPrompts: p.numPrompts, outputLen: p.outputLen, seed: p.seed, completed: s.completed, failed: s.failed, ttftMs: s.ttftMs, cachedPromptTokens: o.cachedPromptTokens, errors: o.r.errors }));
      }
      blockS = (performance.now() - blockStart) / 1000;
    }
    if (samples.length === 0) {
      if (withDirect) log(`concurrency ${c}: gateway overhead runs skipped, ${(budgetS - elapsedS()).toFixed(0)} s of --budget-s left`);
      console.log(JSON.stringify({ kind: "gateway-overhead", concurrency: c, skipped: withDirect ? "budget" : "--targets gateway" }));
      lastConcS = (performance.now() - concStart) / 1000;
      continue;
    }
    const summary = summarizeOverhead(samples);
    const ov: OverheadRow = { concurrency: c, promptsPerRun: overheadPrompts(c), outputLen: planner.shortOutputLen, ...summary };
    overheadRows.push(ov);
    const note = `TTFT p50 per run, median over ${summary.runsPerTarget} runs per target in G D D G blocks; ${ov.promptsPerRun} prompts of ${inputLen} tokens per run (one wave at this concurrency), ${ov.outputLen} tokens out (TTFT only): fewer than the main runs, to fit the budget`;
    console.log(JSON.stringify({ kind: "gateway-overhead", ...ov, note }));
    log(`concurrency ${c}: gateway adds ${summary.gatewayAddedTtftMs.toFixed(2)} ms (${summary.gatewayAddedTtftPct.toFixed(1)}%) to TTFT p50; pair ratios ${summary.pairRatios.join(", ")}`);
    lastConcS = (performance.now() - concStart) / 1000;
  }
  printTables();
} finally {
  await stack?.stop();
}

function row(c: number, target: string, r: BenchResult): Record<string, unknown> {
  const s = r.summary;
  const decodeTokS = s.tpotMs.p50 > 0 ? (c * 1000) / s.tpotMs.p50 : null;
  const roof = rooflineTokS(c);
  return {
    model: modelName,
    zipf: Number(values.zipf),
    int8Experts: values.int8,
    ep,
    concurrency: c,
    target,
    inputLen: r.options.inputLen,
    outputLen: r.options.outputLen,
    ...s,
    decodeTokS: decodeTokS === null ? null : Math.round(decodeTokS),
    rooflineTokS: roof,
    ofRoofline: roof && decodeTokS ? +(decodeTokS / roof).toFixed(3) : null,
    shortOutputs: r.shortOutputs,
    errors: r.errors,
  };
}
