/**
 * The GPU soak: the model server on the CUDA backend (a random-weight model at a real shape) and
 * the gateway in front, both as Bun bundles (make-bundles.sh), under an open loop of mixed
 * production traffic (soak-mix.ts: streamed, cancelled, plain and chat completions, sampled and
 * greedy, log-probabilities, penalties, stops, shared prefixes, requests that must be refused)
 * for --duration seconds; then the server must drain (no sequence running or waiting, no KV
 * block held by a sequence), stay ready, and give a greedy probe the same text as before the
 * traffic. While it runs, the server's load gauges, both processes' RSS and the GPU's memory are
 * sampled. Run from the repository root; exit status 0 when the verdict (soak-verdict.ts) passes,
 * 1 when it fails, 2 when the servers did not start.
 *
 *   bun bench/serving/device-soak.ts --shape qwen3-30b-a3b --duration 240 --rate 12 --out /tmp/soak [--int8]
 *   # the same with a KV cache too small for the batch, so sequences are preempted and recomputed all along:
 *   bun bench/serving/device-soak.ts --shape qwen3-30b-a3b --duration 240 --rate 24 --server-args="--kv-blocks 1024"
 *   # local, the CPU backend and the bundled model, from the sources:
 *   bun bench/serving/device-soak.ts --backend cpu --source --model model-server/models/tiny-wordnet-moe \
 *     --vocab 4000 --duration 10 --rate 4 --max-prompt 96 --max-output 16 --out /tmp/soak
 *   # the gateway alone under the mix: the real engine over a runner that answers each step in 1 ms
 *   bun bench/serving/device-soak.ts --source --instant-ms 1 --model model-server/models/tiny-wordnet-moe \
 *     --vocab 4000 --duration 120 --rate 24 --max-prompt 700 --max-output 256 --out /tmp/soak
 *
 * stdout: one JSON line (kind "soak"): options, counts per kind, failures, TTFT of the streamed requests
 * (the first data event, cancelled streams included) and end to end of the completed ones, peaks of the gauges,
 * RSS slopes (KiB/min) and GPU memory over the run, the
 * probe. Also written to --out/soak.json, with every sample and record in --out/soak-records.jsonl.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { parseArgs } from "node:util";
import { createSeededRand } from "@dispatch/common/src/seeded-rand";
import { procStats, slope } from "../../test/support/proc-stats";
import { dist } from "./metrics";
import { writeRandomModel } from "./random-model";
import { counterValue } from "./server-metrics";
import { killStackOnSignal, stackEntries, startServingStack, type ServingStack } from "./serving-stack";
import { ordinaryVocab } from "./shapes";
import { sendSoakRequest, type SoakRecord } from "./soak-client";
import { soakRequest, type SoakMixOptions, type SoakRequest } from "./soak-mix";
import { soakVerdict, type DrainState } from "./soak-verdict";

const { values: a } = parseArgs({
  options: {
    shape: { type: "string", default: "qwen3-30b-a3b" },
    model: { type: "string" },
    backend: { type: "string", default: "cuda" },
    source: { type: "boolean", default: false },
    bundle: { type: "string", default: join(process.cwd(), "model-server", "native-cuda", "build", "bundle") },
    vocab: { type: "string" },
    duration: { type: "string", default: "240" },
    rate: { type: "string", default: "12" },
    "max-in-flight": { type: "string", default: "96" },
    "max-requests": { type: "string", default: "20000" },
    "max-prompt": { type: "string", default: "4096" },
    "max-output": { type: "string", default: "256" },
    "max-num-seqs": { type: "string", default: "64" },
    "request-timeout-s": { type: "string", default: "180" },
    every: { type: "string", default: "2" },
    seed: { type: "string", default: "1" },
    "server-args": { type: "string", default: "" },
    // the routed experts quantized to int8 weight-only at load (DISPATCH_CUDA_INT8_EXPERTS=1), as device-serve --int8
    int8: { type: "boolean", default: false },
    // the API's newer features in the mix too (n, batches of prompts, JSON mode, logit_bias, priority, echo; soak-mix.ts)
    features: { type: "boolean", default: false },
    // the gateway's own soak: bench/gateway/instant-server.ts (the real engine over a runner answering each step
    // after this many ms) instead of the model server; --model names the model directory it serves
    "instant-ms": { type: "string" },
    out: { type: "string", default: "/tmp/soak" },
  },
});
const num = (name: keyof typeof a, min: number): number => {
  const v = Number(a[name]);
  if (!(v >= min)) throw new Error(`--${name} must be a number >= ${min}, got "${a[name]}"`);
  return v;
};
const durationS = num("duration", 1);
const rate = num("rate", 0.01);
const maxInFlight = num("max-in-flight", 1);
const maxRequests = num("max-requests", 1);
const timeoutMs = num("request-timeout-s", 1) * 1000;
const everyMs = num("every", 0.1) * 1000;
const seed = num("seed", 0);
const out = a.out!;
mkdirSync(out, { recursive: true });
const log = (m: string) => process.stderr.write(`[device-soak] ${m}\n`);
const ROOT = process.cwd();

const dir = a.model ?? join(out, `${a.shape}-random`);
if (!a.model) writeRandomModel(a.shape!, dir, { seed: 1 });
const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as { max_position_embeddings: number };
const vocab = a.vocab ? Number(a.vocab) : ordinaryVocab(a.shape!);
const { serverMain, gatewayMain } = stackEntries({ source: a.source!, bundle: a.bundle!, root: ROOT });

let stack: ServingStack | undefined;
killStackOnSignal(() => stack, log);

interface Sample {
  t: number;
  running: number;
  waiting: number;
  kvBlocksUsed: number;
  kvBlocksCached: number;
  /** dispatch_ms_preemptions_total so far (a counter) */
  preemptions: number;
  serverRssKiB?: number;
  gatewayRssKiB?: number;
  gpuMemMiB?: number;
}

async function gauges(msUrl: string): Promise<Omit<Sample, "t">> {
  const text = await (await fetch(`${msUrl}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const g = (n: string) => counterValue(text, `dispatch_ms_${n}`);
  return { running: g("running_sequences"), waiting: g("waiting_sequences"), kvBlocksUsed: g("kv_blocks_used"), kvBlocksCached: g("kv_blocks_cached"), preemptions: g("preemptions_total") };
}

function gpuMemMiB(): number | undefined {
  try {
    const r = Bun.spawnSync(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"], { stdout: "pipe", stderr: "ignore" });
    const v = Number(r.stdout.toString().trim().split("\n")[0]);
    return r.exitCode === 0 && Number.isFinite(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

async function probe(s: ServingStack): Promise<string> {
  const rng = createSeededRand(seed + 99);
  const prompt = Array.from({ length: 10 }, () => Math.floor(rng() * vocab));
  const res = await fetch(`${s.base}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: s.model, prompt, max_tokens: 24, temperature: 0, ignore_eos: true }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = (await res.json()) as { choices?: { text: string }[] };
  if (!res.ok || !body.choices?.[0]) throw new Error(`the probe got HTTP ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
  return body.choices[0].text;
}

/** Until nothing runs, waits or holds a KV block (at most 30 s), then /readyz. */
async function drain(s: ServingStack): Promise<DrainState> {
  const until = Date.now() + 30_000;
  let g = await gauges(s.msUrl);
  while ((g.running || g.waiting || g.kvBlocksUsed) && Date.now() < until) {
    await Bun.sleep(250);
    g = await gauges(s.msUrl);
  }
  const ready = await fetch(`${s.msUrl}/readyz`, { signal: AbortSignal.timeout(5000) }).then((r) => r.status === 200, () => false);
  return { running: g.running, waiting: g.waiting, kvBlocksUsed: g.kvBlocksUsed, ready, serverExited: s.serverExitCode() !== null };
}

try {
  const instant = a["instant-ms"] !== undefined;
  const serverArgs = instant
    ? ["--model", dir, "--max-num-seqs", a["max-num-seqs"]!, "--device-ms", a["instant-ms"]!, ...a["server-args"]!.split(/\s+/).filter(Boolean)]
    : ["--model", dir, "--backend", a.backend!, "--max-num-seqs", a["max-num-seqs"]!, "--max-batch-tokens", "8192", ...a["server-args"]!.split(/\s+/).filter(Boolean)];
  try {
    const serverEnv: Record<string, string> = a.int8 ? { DISPATCH_CUDA_INT8_EXPERTS: "1" } : {};
    stack = await startServingStack({ out, serverMain: instant ? join(ROOT, "bench", "gateway", "instant-server.ts") : serverMain, gatewayMain, serverArgs, serverEnv, cwd: ROOT, log });
  } catch (e) {
    log(String(e));
    process.exit(2);
  }
  const s = stack;
  const mix: SoakMixOptions = { model: s.model, vocab, maxPrompt: num("max-prompt", 4), maxOutput: num("max-output", 1), contextLen: config.max_position_embeddings, seed, features: a.features };
  const probeBefore = await probe(s);
  const rng = createSeededRand(seed);
  const requests: SoakRequest[] = [];
  const records: SoakRecord[] = [];
  const samples: Sample[] = [];
  const inFlight = new Set<Promise<void>>();
  const t0 = performance.now();
  const elapsedS = () => (performance.now() - t0) / 1000;
  let held = 0;
  const sampler = setInterval(async () => {
    try {
      samples.push({ t: +elapsedS().toFixed(2), ...(await gauges(s.msUrl)), serverRssKiB: procStats(s.serverPid)?.rssKiB, gatewayRssKiB: procStats(s.gatewayPid)?.rssKiB, gpuMemMiB: gpuMemMiB() });
    } catch {
      // a missed sample; the drain check reads the gauges again
    }
  }, everyMs);
  log(`${rate} requests/s for ${durationS} s, at most ${maxInFlight} in flight`);
  let next = 0;
  while (elapsedS() < durationS && requests.length < maxRequests && s.serverExitCode() === null) {
    const wait = next - elapsedS();
    if (wait > 0) await Bun.sleep(Math.min(wait * 1000, 1000));
    if (elapsedS() < next) continue;
    next += -Math.log(1 - rng()) / rate;
    if (inFlight.size >= maxInFlight) {
      held++;
      await Promise.race(inFlight);
    }
    const req = soakRequest(requests.length, rng, mix);
    requests.push(req);
    const p: Promise<void> = sendSoakRequest(s.base, req, timeoutMs).then((r) => {
      records.push(r);
      inFlight.delete(p);
    });
    inFlight.add(p);
  }
  log(`sent ${requests.length} in ${elapsedS().toFixed(1)} s (${held} arrivals waited for a slot); waiting for ${inFlight.size} in flight`);
  await Promise.all(inFlight);
  clearInterval(sampler);
  const drained = await drain(s);
  const probeAfter = drained.serverExited ? "" : await probe(s).catch((e) => `(probe failed: ${e})`);
  const v = soakVerdict({ requests, records, drained, probe: { before: probeBefore, after: probeAfter } });
  const ok = records.filter((r) => r.status === 200 && !r.error);
  const ttft = ok.filter((r) => r.stream && r.firstByteMs !== undefined).map((r) => r.firstByteMs!);
  const e2e = ok.filter((r) => r.kind !== "invalid" && !r.cancelled).map((r) => r.durationMs);
  const rss = (k: "serverRssKiB" | "gatewayRssKiB") => {
    const pts = samples.filter((x) => x[k] !== undefined).map((x) => [x.t / 60, x[k]!] as const);
    return { firstKiB: pts[0]?.[1], lastKiB: pts.at(-1)?.[1], slopeKiBPerMin: Math.round(slope(pts)) };
  };
  const gpu = samples.map((x) => x.gpuMemMiB).filter((x): x is number => x !== undefined);
  const result = {
    kind: "soak",
    model: basename(dir),
    backend: a.backend,
    date: new Date().toISOString(),
    options: { int8Experts: a.int8, features: a.features, durationS, rate, maxInFlight, maxPrompt: mix.maxPrompt, maxOutput: mix.maxOutput, contextLen: mix.contextLen, seed, requestTimeoutS: timeoutMs / 1000 },
    readyS: +s.readyS.toFixed(1),
    sent: requests.length,
    heldArrivals: held,
    // sequences the server preempted for KV room over the run (--server-args "--kv-blocks N" forces them)
    preemptions: drained.serverExited ? samples.at(-1)?.preemptions ?? 0 : (await gauges(s.msUrl).catch(() => samples.at(-1)))?.preemptions ?? 0,
    ok: v.ok,
    counts: v.counts,
    failureCount: v.failures.length,
    failures: v.failures.slice(0, 50),
    outputTokens: records.reduce((n, r) => n + (r.outputTokens ?? 0), 0),
    ttftMs: dist(ttft),
    e2eMs: dist(e2e),
    peaks: { running: Math.max(0, ...samples.map((x) => x.running)), waiting: Math.max(0, ...samples.map((x) => x.waiting)), kvBlocksUsed: Math.max(0, ...samples.map((x) => x.kvBlocksUsed)), kvBlocksCached: Math.max(0, ...samples.map((x) => x.kvBlocksCached)) },
    rss: { server: rss("serverRssKiB"), gateway: rss("gatewayRssKiB") },
    gpuMemMiB: gpu.length ? { first: gpu[0], last: gpu.at(-1), max: Math.max(...gpu) } : null,
    drained,
    probe: { before: probeBefore, after: probeAfter },
  };
  writeFileSync(join(out, "soak.json"), `${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(join(out, "soak-records.jsonl"), [...samples.map((x) => JSON.stringify({ sample: x })), ...records.map((r) => JSON.stringify({ ...r, text: r.text.slice(0, 80) }))].join("\n") + "\n");
  console.log(JSON.stringify(result));
  log(`${v.ok ? "PASS" : "FAIL"}: ${requests.length} requests, ${v.failures.length} failures${v.failures.length ? `:\n  ${v.failures.slice(0, 20).join("\n  ")}` : ""}`);
  await s.stop();
  process.exit(v.ok ? 0 : 1);
} catch (e) {
  log(`error: ${e instanceof Error ? e.stack : String(e)}`);
  await stack?.stop();
  process.exit(2);
}
