/**
 * The serving benchmark on the GPU machine, end to end: a random-weight model directory at a
 * real shape, the model server on the CUDA backend and the gateway in front (both as Bun bundles,
 * since that machine has no node_modules: bench/serving/make-bundles.sh, which bundles this
 * script too), then serve-bench at each concurrency through the gateway and straight to the
 * model server over Connect (the gateway's share of TTFT is the difference). One JSON line per
 * concurrency and target on stdout; the processes' logs in --out. Run from the repository root.
 *
 *   bun bench/serving/device-serve.ts --shape qwen3-30b-a3b --concurrency 1,16,64 \
 *     --input-len 512 --output-len 128 --out /tmp/serve [--zipf 1.0]
 */
import { mkdirSync } from "node:fs";
import { basename, join } from "node:path";
import { parseArgs } from "node:util";
import { freePort } from "../gateway/processes";
import { writeRandomModel } from "./random-model";
import { formatResult, runBench } from "./serve-bench";
import { SHAPE_SPECIALS } from "./shapes";

const { values } = parseArgs({
  options: {
    shape: { type: "string", default: "qwen3-30b-a3b" },
    concurrency: { type: "string", default: "1,16,64" },
    "input-len": { type: "string", default: "512" },
    "output-len": { type: "string", default: "128" },
    "kv-memory-mb": { type: "string", default: "8000" },
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
const out = values.out!;
mkdirSync(out, { recursive: true });
const dir = values.model ?? join(out, `${values.shape}-random`);
if (!values.model) writeRandomModel(values.shape!, dir, { seed: 1, zipf: Number(values.zipf) });
const serverMain = values.source ? join(ROOT, "model-server", "src", "main.ts") : join(values.bundle!, "model-server.js");
const gatewayMain = values.source ? join(ROOT, "gateway", "src", "main.ts") : join(values.bundle!, "gateway.js");
const conc = values.concurrency!.split(",").map(Number);
const maxConc = Math.max(...conc);
type Proc = { name: string; proc: ReturnType<typeof Bun.spawn> };
const procs: Proc[] = [];
/** A Bun process whose stdout and stderr go to files in --out (a full pipe would stall it). */
function start(name: string, argv: string[]): Proc {
  const proc = Bun.spawn([process.execPath, ...argv], { cwd: ROOT, stdout: Bun.file(join(out, `${name}.out`)), stderr: Bun.file(join(out, `${name}.log`)) });
  const p = { name, proc };
  procs.push(p);
  return p;
}
const log = (m: string) => process.stderr.write(`[device-serve] ${m}\n`);
try {
  const msPort = await freePort();
  const server = start("model-server", [serverMain, "--model", dir, "--port", String(msPort), "--backend", values.backend!, "--max-num-seqs", String(maxConc), "--max-batch-tokens", "8192", "--kv-memory-mb", values["kv-memory-mb"]!]);
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
  for (const c of conc) {
    const common = { model, numPrompts: Math.max(4, 2 * c), inputLen: Number(values["input-len"]), outputLen: Number(values["output-len"]), requestRate: Infinity, maxConcurrency: c, vocab, seed: c };
    const viaGateway = await runBench({ ...common, baseUrl: base });
    const direct = await runBench({ ...common, baseUrl: `http://127.0.0.1:${msPort}`, target: "rpc" });
    for (const [target, r] of [["gateway", viaGateway], ["direct-rpc", direct]] as const) {
      log(`concurrency ${c}, ${target}\n${formatResult(r)}`);
      console.log(JSON.stringify({ model: values.model ? basename(values.model) : `${values.shape}-random`, zipf: Number(values.zipf), concurrency: c, target, ...r.summary, shortOutputs: r.shortOutputs, errors: r.errors }));
    }
    const added = viaGateway.summary.ttftMs.p50 / direct.summary.ttftMs.p50 - 1;
    console.log(JSON.stringify({ concurrency: c, gatewayAddedTtftP50: +added.toFixed(4), gatewayTtftP50Ms: viaGateway.summary.ttftMs.p50, directTtftP50Ms: direct.summary.ttftMs.p50 }));
  }
} finally {
  for (const p of procs) if (p.proc.exitCode === null) p.proc.kill("SIGTERM");
  await Promise.race([Promise.all(procs.map((p) => p.proc.exited)), Bun.sleep(5000)]);
  for (const p of procs) if (p.proc.exitCode === null) p.proc.kill("SIGKILL");
}
