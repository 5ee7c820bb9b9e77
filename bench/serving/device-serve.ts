/**
 * The serving benchmark on the GPU machine, end to end: a random-weight model directory at a
 * real shape, the model server on the CUDA backend and the gateway in front (both as Bun bundles,
 * since that machine has no node_modules: bench/serving/make-bundles.sh, which bundles this
 * script too), then serve-bench at each concurrency through the gateway and straight to the
 * model server over Connect (the gateway's share of TTFT is the difference). Prompts of
 * --input-len random tokens, exactly --output-len tokens out (EOS ignored), 2 x concurrency
 * requests (at least 4) per run. Run from the repository root.
 *
 *   bun bench/serving/device-serve.ts --shape qwen3-30b-a3b --concurrency 1,4,16,64 \
 *     --input-len 512 --output-len 256 --out /tmp/serve [--zipf 1.0] [--budget-s 140]
 *
 * stdout, one JSON line each: first the weight-read roofline, measured in this process before the
 * server starts (HBM bytes/s from a 4 GiB device copy; per concurrency c, roofline tokens/s =
 * c * HBM bytes/s / the weight bytes one decode step of c sequences reads, decodeWeightBytes);
 * then per concurrency and target the serve-bench summary (TTFT, TPOT, ITL, E2E: mean, p50,
 * p90, p99 ms; output and total tokens/s) with decodeTokS = c * 1000 / TPOT p50 and its share
 * of the roofline; then the gateway's added TTFT. Logs in --out. A concurrency is not started
 * when the previous one's time would run past --budget-s; SIGTERM stops the servers at once.
 */
import { mkdirSync } from "node:fs";
import { basename, join } from "node:path";
import { parseArgs } from "node:util";
import { probeCuda } from "../../model-server/src/backend/cuda/native";
import { decodeWeightBytes } from "../../model-server/src/backend/cuda/random-weights";
import { freePort } from "../gateway/processes";
import { writeRandomModel } from "./random-model";
import { formatResult, runBench, type BenchResult } from "./serve-bench";
import { modelShape, SHAPE_SPECIALS } from "./shapes";

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
  },
});
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
const modelName = values.model ? basename(values.model) : `${values.shape}-random`;

// The roofline first, while this process is alone on the GPU (the server's KV takes most of it later).
const roofline = measureRoofline();
console.log(JSON.stringify({ kind: "roofline", model: modelName, ...roofline }));

const dir = values.model ?? join(out, `${values.shape}-random`);
if (!values.model) writeRandomModel(values.shape!, dir, { seed: 1, zipf: Number(values.zipf) });
const serverMain = values.source ? join(ROOT, "model-server", "src", "main.ts") : join(values.bundle!, "model-server.js");
const gatewayMain = values.source ? join(ROOT, "gateway", "src", "main.ts") : join(values.bundle!, "gateway.js");
type Proc = { name: string; proc: ReturnType<typeof Bun.spawn> };
const procs: Proc[] = [];
/** A Bun process whose stdout and stderr go to files in --out (a full pipe would stall it). */
function start(name: string, argv: string[]): Proc {
  const proc = Bun.spawn([process.execPath, ...argv], { cwd: ROOT, stdout: Bun.file(join(out, `${name}.out`)), stderr: Bun.file(join(out, `${name}.log`)) });
  const p = { name, proc };
  procs.push(p);
  return p;
}
// A timeout's SIGTERM must not leave a draining model server holding the GPU for the next stage.
for (const sig of ["SIGTERM", "SIGINT"] as const) {
  process.on(sig, () => {
    log(`${sig}: stopping the servers`);
    for (const p of procs) if (p.proc.exitCode === null) p.proc.kill("SIGKILL");
    process.exit(143);
  });
}

/** HBM bandwidth (GPU only) and per concurrency the weight-read roofline of the --shape model. */
function measureRoofline(): Record<string, unknown> {
  if (values.backend !== "cuda") return { skipped: `backend ${values.backend}` };
  if (values.model) return { skipped: "--model: the roofline needs the --shape of the random model" };
  const probe = probeCuda();
  if (!probe.ok) return { skipped: probe.reason };
  const hbm = probe.addon.measureHbm(2 ** 32, 5);
  const config = modelShape(values.shape!);
  const perConcurrency = conc.map((c) => {
    const bytes = decodeWeightBytes(config, c, 2);
    return { concurrency: c, weightBytesPerStep: Math.round(bytes), stepMs: +((bytes / hbm) * 1000).toFixed(3), rooflineTokS: Math.round((c * hbm) / bytes) };
  });
  log(`${probe.device.name}: HBM ${(hbm / 1e12).toFixed(2)} TB/s; roofline ${perConcurrency.map((r) => `c${r.concurrency} ${r.rooflineTokS} tok/s`).join(", ")}`);
  return { device: probe.device.name, hbmTBs: +(hbm / 1e12).toFixed(3), note: "uniform routing assumed", perConcurrency };
}

const rooflineTokS = (c: number): number | null =>
  (roofline.perConcurrency as { concurrency: number; rooflineTokS: number }[] | undefined)?.find((r) => r.concurrency === c)?.rooflineTokS ?? null;

try {
  const msPort = await freePort();
  const kvArgs = [
    ...(values["kv-gpu-share"] ? ["--kv-gpu-share", values["kv-gpu-share"]] : []),
    ...(values["kv-memory-mb"] ? ["--kv-memory-mb", values["kv-memory-mb"]] : []),
  ];
  const server = start("model-server", [serverMain, "--model", dir, "--port", String(msPort), "--backend", values.backend!, "--max-num-seqs", String(maxConc), "--max-batch-tokens", "8192", ...kvArgs]);
  const gwPort = await freePort();
  const gateway = start("gateway", [gatewayMain, "--port", String(gwPort), "--backend", `dispatch=http://127.0.0.1:${msPort}`]);
  const base = `http://127.0.0.1:${gwPort}`;
  let model = "";
  const t0 = performance.now();
  // until the gateway lists the model (the server generates the weights first); a server exit ends it
  const until = Date.now() + 150_000;
  while (!model) {
    if (server.proc.exitCode !== null) throw new Error(`the model server exited with status ${server.proc.exitCode} (see ${out}/model-server.log)`);
    if (gateway.proc.exitCode !== null) throw new Error(`the gateway exited with status ${gateway.proc.exitCode} (see ${out}/gateway.log)`);
    if (Date.now() > until) throw new Error("not serving after 150 s");
    try {
      const body = (await (await fetch(`${base}/v1/models`)).json()) as { data?: { id: string }[] };
      model = body.data?.[0]?.id ?? "";
    } catch {
      // not up yet
    }
    if (!model) await Bun.sleep(250);
  }
  log(`serving ${model} after ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const vocab = values.vocab ? Number(values.vocab) : Math.min(...SHAPE_SPECIALS[values.shape!]!.map(([id]) => id));
  let lastPairS = 0;
  for (const c of conc) {
    if (budgetS > 0 && elapsedS() + 1.5 * lastPairS > budgetS) {
      log(`concurrency ${c} skipped: ${(budgetS - elapsedS()).toFixed(0)} s of --budget-s left, the last run took ${lastPairS.toFixed(0)} s`);
      console.log(JSON.stringify({ concurrency: c, skipped: "budget" }));
      continue;
    }
    const pairStart = performance.now();
    const common = { model, numPrompts: Math.max(4, 2 * c), inputLen: Number(values["input-len"]), outputLen: Number(values["output-len"]), requestRate: Infinity, maxConcurrency: c, vocab, seed: c };
    const viaGateway = await runBench({ ...common, baseUrl: base });
    const direct = await runBench({ ...common, baseUrl: `http://127.0.0.1:${msPort}`, target: "rpc" });
    lastPairS = (performance.now() - pairStart) / 1000;
    for (const [target, r] of [["gateway", viaGateway], ["direct-rpc", direct]] as const) {
      log(`concurrency ${c}, ${target}\n${formatResult(r)}`);
      console.log(JSON.stringify(row(c, target, r)));
    }
    const added = viaGateway.summary.ttftMs.p50 / direct.summary.ttftMs.p50 - 1;
    console.log(JSON.stringify({ concurrency: c, gatewayAddedTtftP50: +added.toFixed(4), gatewayTtftP50Ms: viaGateway.summary.ttftMs.p50, directTtftP50Ms: direct.summary.ttftMs.p50 }));
  }
} finally {
  for (const p of procs) if (p.proc.exitCode === null) p.proc.kill("SIGTERM");
  await Promise.race([Promise.all(procs.map((p) => p.proc.exited)), Bun.sleep(5000)]);
  for (const p of procs) if (p.proc.exitCode === null) p.proc.kill("SIGKILL");
}

function row(c: number, target: string, r: BenchResult): Record<string, unknown> {
  const s = r.summary;
  const decodeTokS = s.tpotMs.p50 > 0 ? (c * 1000) / s.tpotMs.p50 : null;
  const roof = rooflineTokS(c);
  return {
    model: modelName,
    zipf: Number(values.zipf),
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
