/**
 * Command-line flags and `DISPATCH_MS_*` environment variables of the model
 * server, parsed into one options object. Flags win over the environment;
 * every bad value is an error that names the flag and what it expected.
 *
 * @example
 * parseOptions(["--model", "model-server/models/tiny", "--port", "0"], process.env);
 */
import os from "node:os";

export interface ServerOptions {
  model: string;
  /** The model's name in the API; undefined: the model directory's name. */
  servedModelName?: string;
  host: string;
  port: number;
  /** h2c gRPC listener; undefined: off. */
  grpcPort: number | undefined;
  backend: "cpu" | "cuda" | "auto";
  blockSize: number;
  /** KV blocks; undefined: sized from kvMemoryMb, or on CUDA from kvGpuShare. */
  kvBlocks: number | undefined;
  /** KV memory budget (MB); undefined: 512 on the CPU, kvGpuShare on CUDA. */
  kvMemoryMb: number | undefined;
  /** Share of the device memory free after the weights that the KV cache takes on CUDA, in (0, 1]. */
  kvGpuShare: number;
  maxQueue: number;
  /** Undefined: the backend's default (batch-limits.ts), settled once the backend is chosen. */
  maxNumSeqs?: number;
  maxBatchTokens?: number;
  /** Cap on the served context (tokens); undefined: the model's. */
  maxContext: number | undefined;
  specTokens: number;
  serverId: string;
  /** Seconds running sequences get to finish on SIGTERM. */
  drainTimeoutS: number;
  /** Expert parallelism over this many GPUs of the host (1: off; > 1 needs --backend cuda). */
  ep: number;
  /** EP steps whose largest per-GPU share is at most this many tokens use the low-latency exchange. */
  epLowLatencyTokens: number;
  /** CUDA: routed experts quantized to int8 weight-only at load (per output row; docs/cuda-backend.md). */
  int8Experts: boolean;
  /** One step at a time even where the runner could overlap decode steps (engine/lookahead.ts). */
  syncDecode: boolean;
  /**
   * Seconds a model step may take before the device is taken as stuck (live requests fail, the server reports
   * failed); 0: no limit; undefined: the backend's default (stepTimeoutS()).
   */
  stepTimeoutS: number | undefined;
  help: boolean;
}

export class OptionsError extends Error {
  override name = "OptionsError";
}

/** The step timeout (seconds, 0: none) for the chosen backend: the flag where given, else 60 on CUDA (its longest
 * steps take well under a second, so a minute means a kernel that will not end) and none on the CPU (a large model's
 * prefill step there can take minutes). */
export function stepTimeoutS(given: number | undefined, backend: "cpu" | "cuda"): number {
  return given ?? (backend === "cuda" ? 60 : 0);
}

/** Per-step batch limits when the flags leave them unset: a GPU step of 8192 tokens costs about
 * what one of 256 does on the weights, so the CUDA backend batches far more. */
export const BATCH_DEFAULTS = {
  cpu: { maxNumSeqs: 32, maxBatchTokens: 256 },
  cuda: { maxNumSeqs: 256, maxBatchTokens: 8192 },
} as const;

/** The step limits for the chosen backend: the flags where given, else its defaults; refused when
 * a step could not hold one decode token for every running sequence. */
export function batchLimits(given: { maxNumSeqs?: number; maxBatchTokens?: number }, backend: "cpu" | "cuda"): { maxNumSeqs: number; maxBatchTokens: number } {
  const d = BATCH_DEFAULTS[backend];
  const maxNumSeqs = given.maxNumSeqs ?? (given.maxBatchTokens !== undefined ? Math.min(d.maxNumSeqs, given.maxBatchTokens) : d.maxNumSeqs);
  const maxBatchTokens = given.maxBatchTokens ?? Math.max(d.maxBatchTokens, maxNumSeqs);
  if (maxBatchTokens < maxNumSeqs) {
    throw new OptionsError(`--max-batch-tokens (${maxBatchTokens}) must be >= --max-num-seqs (${maxNumSeqs}) so every running sequence can decode each step`);
  }
  return { maxNumSeqs, maxBatchTokens };
}

interface Flag {
  name: string;
  env: string;
  help: string;
  kind: "string" | "int" | "number" | "bool" | "enum";
  values?: string[];
  min?: number;
}

export const FLAGS: Flag[] = [
  { name: "model", env: "DISPATCH_MS_MODEL", kind: "string", help: "model directory (Hugging Face layout); also DISPATCH_MODEL_PATH" },
  { name: "served-model-name", env: "DISPATCH_MS_SERVED_MODEL_NAME", kind: "string", help: "the model's name in the API (GetModelInfo, the gateway's /v1/models, requests' model) (default: the model directory's name)" },
  { name: "host", env: "DISPATCH_MS_HOST", kind: "string", help: "listen address (default 127.0.0.1)" },
  { name: "port", env: "DISPATCH_MS_PORT", kind: "int", min: 0, help: "Connect + gRPC-web + /healthz /readyz /metrics port (default 50051; 0: any free port)" },
  { name: "grpc-port", env: "DISPATCH_MS_GRPC_PORT", kind: "int", min: 0, help: "also serve gRPC over h2c on this port (default off)" },
  { name: "backend", env: "DISPATCH_MS_BACKEND", kind: "enum", values: ["cpu", "cuda", "auto"], help: "compute backend (default cpu; auto: cuda when a GPU is usable, else cpu)" },
  { name: "block-size", env: "DISPATCH_MS_BLOCK_SIZE", kind: "int", min: 1, help: "KV block size in tokens (default 16)" },
  { name: "kv-blocks", env: "DISPATCH_MS_KV_BLOCKS", kind: "int", min: 1, help: "KV cache blocks (default: from --kv-memory-mb)" },
  { name: "kv-memory-mb", env: "DISPATCH_MS_KV_MEMORY_MB", kind: "int", min: 1, help: "KV cache memory budget when --kv-blocks is not given (default 512 on the CPU; on CUDA --kv-gpu-share)" },
  { name: "kv-gpu-share", env: "DISPATCH_MS_KV_GPU_SHARE", kind: "number", help: "CUDA: share (0, 1] of the device memory free after the weights taken by the KV cache when neither --kv-blocks nor --kv-memory-mb is given (default 0.9)" },
  { name: "max-queue", env: "DISPATCH_MS_MAX_QUEUE", kind: "int", min: 0, help: "requests queued beyond the free batch slots before RESOURCE_EXHAUSTED (default 256)" },
  { name: "max-num-seqs", env: "DISPATCH_MS_MAX_NUM_SEQS", kind: "int", min: 1, help: "sequences per batch (default 32 on cpu, 256 on cuda)" },
  { name: "max-batch-tokens", env: "DISPATCH_MS_MAX_BATCH_TOKENS", kind: "int", min: 1, help: "tokens per engine step, the chunked-prefill budget (default 256 on cpu, 8192 on cuda)" },
  { name: "max-context", env: "DISPATCH_MS_MAX_CONTEXT", kind: "int", min: 2, help: "cap on prompt + output tokens (default: the model's)" },
  { name: "spec-tokens", env: "DISPATCH_MS_SPEC_TOKENS", kind: "int", min: 0, help: "prompt-lookup tokens proposed per decode step (default 0: off)" },
  { name: "server-id", env: "DISPATCH_MS_SERVER_ID", kind: "string", help: "id in load reports and KV events (default POD_NAME or host:port)" },
  { name: "drain-timeout-s", env: "DISPATCH_MS_DRAIN_TIMEOUT_S", kind: "int", min: 0, help: "seconds running sequences get to finish on SIGTERM/SIGINT (default 30)" },
  { name: "ep", env: "DISPATCH_MS_EP", kind: "int", min: 1, help: "expert parallelism over this many GPUs of the host, one rank each, attention data parallel (default 1: off; needs --backend cuda)" },
  { name: "ep-low-latency-tokens", env: "DISPATCH_MS_EP_LOW_LATENCY_TOKENS", kind: "int", min: 1, help: "EP steps whose largest per-GPU share is at most this many tokens use the low-latency exchange (default 128)" },
  { name: "int8-experts", env: "DISPATCH_MS_INT8_EXPERTS", kind: "bool", help: "CUDA: quantize the routed experts to int8 weight-only at load (half their memory; faster decode at large batches; needs --backend cuda or auto, not with --ep)" },
  { name: "step-timeout-s", env: "DISPATCH_MS_STEP_TIMEOUT_S", kind: "int", min: 0, help: "seconds a model step may run before the device is taken as stuck: live requests end with an error and the server reports failed (/readyz 503, /healthz 500) for its orchestrator to restart it; 0: no limit (default 60 on CUDA, where the longest step takes well under a second; 0 on the CPU)" },
  { name: "sync-decode", env: "DISPATCH_MS_SYNC_DECODE", kind: "bool", help: "run every step after the previous one returned (off: on CUDA a steady decode batch launches each step before the previous one returns, its tokens chained on the GPU)" },
  { name: "help", env: "", kind: "bool", help: "print this help" },
];

export function usage(): string {
  const lines = FLAGS.map((f) => `  --${f.name}${f.kind === "bool" ? "" : " <v>"}`.padEnd(26) + f.help + (f.env ? ` [${f.env}]` : ""));
  return `usage: bun model-server/src/main.ts --model <dir> [flags]\n${lines.join("\n")}\n`;
}

export function parseOptions(argv: readonly string[], env: Record<string, string | undefined>): ServerOptions {
  const raw = new Map<string, string>();
  for (const f of FLAGS) {
    const v = f.env ? env[f.env] : undefined;
    if (v !== undefined && v !== "") raw.set(f.name, v);
  }
  if (!raw.has("model") && env.DISPATCH_MODEL_PATH) raw.set("model", env.DISPATCH_MODEL_PATH);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith("--")) throw new OptionsError(`unexpected argument "${arg}" (flags start with --; see --help)`);
    const eq = arg.indexOf("=");
    const name = arg.slice(2, eq >= 0 ? eq : undefined);
    const flag = FLAGS.find((f) => f.name === name);
    if (!flag) throw new OptionsError(`unknown flag --${name} (see --help)`);
    if (flag.kind === "bool") {
      raw.set(name, "true");
      continue;
    }
    const value = eq >= 0 ? arg.slice(eq + 1) : argv[++i];
    if (value === undefined) throw new OptionsError(`--${name} needs a value`);
    raw.set(name, value);
  }

  const str = (name: string) => raw.get(name);
  const int = (name: string): number | undefined => {
    const v = raw.get(name);
    if (v === undefined) return undefined;
    const flag = FLAGS.find((f) => f.name === name)!;
    const n = Number(v);
    if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n)) throw new OptionsError(`--${name} must be a whole number, got "${v}"`);
    if (flag.min !== undefined && n < flag.min) throw new OptionsError(`--${name} must be >= ${flag.min}, got ${n}`);
    return n;
  };

  const fraction = (name: string): number | undefined => {
    const v = raw.get(name);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (v.trim() === "" || !Number.isFinite(n) || !(n > 0 && n <= 1)) throw new OptionsError(`--${name} must be a number in (0, 1] (a share of the free device memory, like 0.9), got "${v}"`);
    return n;
  };

  const help = raw.get("help") === "true";
  const model = str("model");
  if (!model && !help) throw new OptionsError("--model <dir> is required (or DISPATCH_MS_MODEL)");
  const backend = str("backend") ?? "cpu";
  if (backend !== "cpu" && backend !== "cuda" && backend !== "auto") throw new OptionsError(`--backend must be auto, cpu or cuda, got "${backend}"`);
  const host = str("host") ?? "127.0.0.1";
  const port = int("port") ?? 50051;
  if (port > 65535) throw new OptionsError(`--port must be <= 65535, got ${port}`);
  const grpcPort = int("grpc-port");
  if (grpcPort !== undefined && grpcPort > 65535) throw new OptionsError(`--grpc-port must be <= 65535, got ${grpcPort}`);
  const maxNumSeqs = int("max-num-seqs");
  const maxBatchTokens = int("max-batch-tokens");
  if (maxNumSeqs !== undefined && maxBatchTokens !== undefined) batchLimits({ maxNumSeqs, maxBatchTokens }, "cpu");
  const ep = int("ep") ?? 1;
  if (ep > 1 && backend !== "cuda") throw new OptionsError(`--ep ${ep} needs --backend cuda (expert parallelism spreads the experts over GPUs), got --backend ${backend}`);
  const bool = (name: string): boolean => {
    const v = raw.get(name);
    if (v === undefined || v === "false" || v === "0") return false;
    if (v === "true" || v === "1") return true;
    throw new OptionsError(`--${name} takes no value; its environment variable must be 1, 0, true or false, got "${v}"`);
  };
  const epLowLatencyTokens = int("ep-low-latency-tokens") ?? 128;
  const int8Experts = bool("int8-experts");
  if (int8Experts && backend === "cpu") throw new OptionsError("--int8-experts needs --backend cuda (or auto): the CPU backend runs the checkpoint's weights");
  if (int8Experts && ep > 1) throw new OptionsError(`--int8-experts is not supported with --ep ${ep} yet (expert parallelism runs bf16 experts)`);
  if (ep > 1 && epLowLatencyTokens > batchLimits({ maxNumSeqs, maxBatchTokens }, "cuda").maxBatchTokens) {
    throw new OptionsError(`--ep-low-latency-tokens (${epLowLatencyTokens}) must be <= --max-batch-tokens`);
  }
  const servedModelName = str("served-model-name");
  if (servedModelName !== undefined && (servedModelName.trim() === "" || servedModelName !== servedModelName.trim())) {
    throw new OptionsError(`--served-model-name must be a name without surrounding spaces, got "${servedModelName}"`);
  }
  return {
    model: model ?? "",
    servedModelName,
    host,
    port,
    grpcPort,
    backend,
    blockSize: int("block-size") ?? 16,
    kvBlocks: int("kv-blocks"),
    kvMemoryMb: int("kv-memory-mb"),
    kvGpuShare: fraction("kv-gpu-share") ?? 0.9,
    maxQueue: int("max-queue") ?? 256,
    maxNumSeqs,
    maxBatchTokens,
    maxContext: int("max-context"),
    specTokens: int("spec-tokens") ?? 0,
    serverId: str("server-id") ?? env.POD_NAME ?? `${os.hostname()}:${port}`,
    drainTimeoutS: int("drain-timeout-s") ?? 30,
    ep,
    epLowLatencyTokens,
    int8Experts,
    syncDecode: bool("sync-decode"),
    stepTimeoutS: int("step-timeout-s"),
    help,
  };
}
