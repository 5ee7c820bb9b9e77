/**
 * A serving benchmark client in the manner of `vllm bench serve`, against any OpenAI-compatible
 * endpoint that takes token-id prompts and ignore_eos (dispatch's gateway does):
 *
 *   bun bench/serving/serve-bench.ts --base-url http://127.0.0.1:8080 --model M \
 *     --num-prompts 256 --input-len 512 --output-len 256 --max-concurrency 64 [--request-rate 8] \
 *     [--vocab 151936] [--seed 0] [--json out.json] [--target rpc  (base URL = a model server)]
 *
 * Prints TTFT, TPOT, ITL and end-to-end latency (mean, p50, p90, p99), output tokens/s and
 * request throughput; --json writes the same with the options that produced it.
 */
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { summarize, type Dist, type Summary } from "./metrics";
import { generateDirect } from "./rpc-client";
import { streamCompletion, type CompletionRecord } from "./stream-client";
import { buildWorkload } from "./workload";

export interface BenchOptions {
  /** The gateway's (OpenAI HTTP) or, with target "rpc", the model server's base URL. */
  baseUrl: string;
  /** "openai" (default): POST /v1/completions; "rpc": Generate straight to a model server. */
  target?: "openai" | "rpc";
  model: string;
  numPrompts: number;
  inputLen: number;
  outputLen: number;
  /** requests/s (Poisson); Infinity = all at once */
  requestRate: number;
  /** at most this many in flight; Infinity = no limit */
  maxConcurrency: number;
  vocab: number;
  seed: number;
  apiKey?: string;
  /** Fields added to every OpenAI request (`--request-extra '{"logprobs":5}'`): penalties, logprobs (target openai). */
  requestExtra?: Record<string, unknown>;
}

export interface BenchResult {
  options: BenchOptions;
  summary: Summary;
  /** requests that returned fewer output tokens than asked (EOS must be ignored) */
  shortOutputs: number;
  errors: string[];
}

export async function runBench(o: BenchOptions): Promise<BenchResult> {
  const w = buildWorkload({ numPrompts: o.numPrompts, inputLen: o.inputLen, outputLen: o.outputLen, rate: o.requestRate, vocab: o.vocab, lowId: Math.min(10, o.vocab - 1), seed: o.seed });
  const limit = Number.isFinite(o.maxConcurrency) ? o.maxConcurrency : w.requests.length;
  const records: CompletionRecord[] = [];
  let inFlight = 0;
  const waiters: (() => void)[] = [];
  const t0 = performance.now();
  await Promise.all(
    w.requests.map(async (r) => {
      const wait = t0 + r.at * 1000 - performance.now();
      if (wait > 0) await Bun.sleep(wait);
      while (inFlight >= limit) await new Promise<void>((res) => waiters.push(res));
      inFlight++;
      try {
        const call = { baseUrl: o.baseUrl, model: o.model, prompt: r.prompt, outputLen: r.outputLen, apiKey: o.apiKey, extra: o.requestExtra };
        records[r.index] = o.target === "rpc" ? await generateDirect(call) : await streamCompletion(call);
      } finally {
        inFlight--;
        waiters.shift()?.();
      }
    }),
  );
  const durationS = (performance.now() - t0) / 1000;
  return {
    options: o,
    summary: summarize(records, durationS),
    shortOutputs: records.filter((r) => !r.error && (r.outputTokens ?? r.tokenTimes.length) < o.outputLen).length,
    errors: [...new Set(records.filter((r) => r.error).map((r) => r.error!))].slice(0, 5),
  };
}

export function formatResult(r: BenchResult): string {
  const s = r.summary;
  const row = (name: string, d: Dist) => `${name.padEnd(10)} ${[d.mean, d.p50, d.p90, d.p99].map((x) => x.toFixed(2).padStart(10)).join("")}`;
  return [
    `requests ${s.completed} ok, ${s.failed} failed in ${s.durationS.toFixed(2)} s (${s.requestsPerS.toFixed(2)} req/s)`,
    `tokens in ${s.inputTokens}, out ${s.outputTokens}; output ${s.outputTokS.toFixed(1)} tok/s, total ${s.totalTokS.toFixed(1)} tok/s`,
    `${"ms".padEnd(10)} ${["mean", "p50", "p90", "p99"].map((x) => x.padStart(10)).join("")}`,
    row("TTFT", s.ttftMs),
    row("TPOT", s.tpotMs),
    row("ITL", s.itlMs),
    row("E2E", s.e2eMs),
    ...(r.shortOutputs ? [`warning: ${r.shortOutputs} requests returned fewer than ${r.options.outputLen} tokens`] : []),
    ...r.errors.map((e) => `error: ${e}`),
  ].join("\n");
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      "base-url": { type: "string", default: "http://127.0.0.1:8080" },
      model: { type: "string" },
      "num-prompts": { type: "string", default: "64" },
      "input-len": { type: "string", default: "512" },
      "output-len": { type: "string", default: "256" },
      "request-rate": { type: "string", default: "inf" },
      "max-concurrency": { type: "string", default: "inf" },
      vocab: { type: "string", default: "256" },
      seed: { type: "string", default: "0" },
      "api-key": { type: "string" },
      json: { type: "string" },
      target: { type: "string", default: "openai" },
      "request-extra": { type: "string" },
    },
  });
  const num = (v: string) => (v === "inf" ? Infinity : Number(v));
  if (!values.model) {
    console.error("--model is required");
    process.exit(2);
  }
  const result = await runBench({
    baseUrl: values["base-url"]!,
    model: values.model,
    numPrompts: num(values["num-prompts"]!),
    inputLen: num(values["input-len"]!),
    outputLen: num(values["output-len"]!),
    requestRate: num(values["request-rate"]!),
    maxConcurrency: num(values["max-concurrency"]!),
    vocab: num(values.vocab!),
    seed: num(values.seed!),
    apiKey: values["api-key"],
    target: values.target === "rpc" ? "rpc" : "openai",
    requestExtra: values["request-extra"] ? (JSON.parse(values["request-extra"]) as Record<string, unknown>) : undefined,
  });
  console.log(formatResult(result));
  if (values.json) writeFileSync(values.json, JSON.stringify(result, null, 2));
  process.exit(result.summary.failed > 0 ? 1 : 0);
}
