/**
 * The one file that loads the CUDA backend's addon (model-server/native-cuda, built by
 * `bun scripts/build-native.ts` where nvcc exists into build/Release/dispatch_cuda.node).
 * The addon links the CUDA runtime statically, so it loads on any x86-64 Linux machine; on one
 * without a usable GPU its first call throws an Error with code "NO_CUDA_DEVICE".
 *
 * @example
 *   const probe = probeCuda();
 *   if (!probe.ok) console.error(`no GPU: ${probe.reason}`);
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

/** An opaque model handle owned by the addon. */
export type ModelHandle = { readonly __brand: "dispatch_cuda_model" };

export interface NativeLayerConfig {
  moe: boolean;
  denseIntermediate: number;
  numExperts: number;
  topK: number;
  intermediate: number;
  normTopK: boolean;
  sharedIntermediate: number;
  sharedGate: boolean;
}

export interface NativeModelConfig {
  numLayers: number;
  hidden: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  vocabSize: number;
  rmsEps: number;
  /** 0 none, 1 per head (Qwen3-MoE), 2 whole projection (OLMoE). */
  qkNorm: 0 | 1 | 2;
  /** <= 0: none. */
  clipQkv: number;
  /** 0: full attention. */
  window: number;
  maxContext: number;
  /** Routed experts as int8 with per-row fp32 scales (weight-only quantization at load). */
  int8Experts?: boolean;
  /** One-token MoE layers in one kernel (moe_block.cu); absent: DISPATCH_CUDA_MOE_BLOCK=1 turns it on (default off: slower than the chain on the H200). */
  moeBlock?: boolean;
  /** One-token steps' gate|up GEMM routes itself (no routing kernel before it); absent: DISPATCH_CUDA_SELF_ROUTE (default on). */
  selfRoute?: boolean;
  invFreq: Float32Array;
  layers: NativeLayerConfig[];
}

/** Weight ids returned by upload()/random()/fill(); -1 or absent = none. */
export interface NativeLayerWeights {
  inputNorm: number;
  postNorm: number;
  qkv: number;
  qkvBias?: number;
  o: number;
  oBias?: number;
  qNorm?: number;
  kNorm?: number;
  /** Dense MLP [2I, H] / [H, I], or routed experts [E, 2I, H] / [E, H, I]. */
  gateUp: number;
  down: number;
  /** fp32 [E, H]. */
  router?: number;
  /** fp32 [E] added to the router logits for selection only (the benchmark's skewed load). */
  routerBias?: number;
  sharedGateUp?: number;
  sharedDown?: number;
  /** fp32 [1, H]. */
  sharedGate?: number;
}

export interface NativeModelWeights {
  embed: number;
  norm: number;
  lmHead: number;
  layers: NativeLayerWeights[];
}

export interface DeviceInfo {
  name: string;
  count: number;
  computeCapability: string;
  freeBytes: number;
  totalBytes: number;
}

export interface CudaAddon {
  deviceInfo(): DeviceInfo;
  /** HBM bytes/s from device-to-device copies (read + write counted), best of reps. */
  measureHbm(bytes: number, reps: number): number;
  createModel(config: NativeModelConfig): ModelHandle;
  /** Test hook: y (+)= x [T, K] . w [N, K]^T through the backend's GEMM (bf16 inputs, fp32 out). */
  testGemm(x: Float32Array, w: Float32Array, y: Float32Array, T: number, K: number, N: number, accumulate: boolean): Float32Array;
  /** Host fp32 -> device (bf16 when asBf16); returns the weight id. */
  upload(m: ModelHandle, data: Float32Array, asBf16: boolean): number;
  /**
   * n values from safetensors byte ranges [file index, begin, end, dtype (0 F32, 1 F16, 2 BF16)]*,
   * in order, into one device tensor (bf16 when asBf16, else fp32); returns the weight id.
   */
  uploadRanges(m: ModelHandle, files: string[], ranges: Float64Array, n: number, asBf16: boolean): number;
  /** n values uniform in [-scale, scale], generated on the device (benchmarks). */
  random(m: ModelHandle, n: number, scale: number, seed: number, asBf16: boolean): number;
  fill(m: ModelHandle, n: number, value: number, asBf16: boolean): number;
  bind(m: ModelHandle, weights: NativeModelWeights): void;
  /** Returns the block-table stride step metadata must use. */
  allocateKv(m: ModelHandle, numBlocks: number, blockSize: number): number;
  kvBytesPerBlock(m: ModelHandle, blockSize: number): number;
  weightBytes(m: ModelHandle): number;
  /** Capture decode steps of up to maxBatch sequences as CUDA graphs (0 = off). */
  setGraphs(m: ModelHandle, maxBatch: number): void;
  graphsCaptured(m: ModelHandle): number;
  /** meta: ids[T] pos[T] slot[T] tokSeq[T] rows[R] tables[S * stride]; resolves with logits [R, V]. */
  step(m: ModelHandle, meta: Int32Array, T: number, S: number, R: number): Promise<Float32Array>;
  /**
   * The same step, sampled on the GPU: params [R * 20] = temperature, topK, topP, seed, step,
   * numBanned, banned[8], frequencyPenalty, presencePenalty, penaltyOffset, penaltyCount, penalizedInput,
   * topLogprobs (pack-step.ts packSampling); resolves with R ids and their raw log-probabilities, and with hostRows
   * (distinct rows in [0, R)) those rows' logits [n, V] in hostLogits, in hostRows' order.
   * A second step may be called before the first resolves (it is enqueued behind it on the GPU; at most two in
   * flight, at most one of them downloading logits); chain (one entry per token, -1 or a row of the previous sampled
   * step) makes token i the id sampled for that row, read on the GPU (native-cuda/src/model_steps.cu).
   * penalties: the (token, count) pairs rows' penaltyOffset / penaltyCount index. When a row asks for top
   * log-probabilities, topIds / topLogprobs hold [R, 20] each (row r's best first; entries past its count unset).
   */
  step(
    m: ModelHandle,
    meta: Int32Array,
    T: number,
    S: number,
    R: number,
    params: Float64Array,
    hostRows?: Int32Array,
    chain?: Int32Array,
    penalties?: Int32Array,
  ): Promise<{ ids: Int32Array; logprobs: Float32Array; hostLogits?: Float32Array; topIds?: Int32Array; topLogprobs?: Float32Array }>;
  /** Whether sampled steps take penalties and top log-probabilities (the cluster sampler runs at this vocabulary). */
  samplingExtras(m: ModelHandle): boolean;
  /** One eager step with an event after every op group: GPU ms per group, summed over layers (blocks the thread). */
  profileStep(m: ModelHandle, meta: Int32Array, T: number, S: number, R: number): Record<string, number>;
  exportKv(m: ModelHandle, blocks: Int32Array, blockSize: number): Uint8Array;
  importKv(m: ModelHandle, blocks: Int32Array, data: Uint8Array): void;
  free(m: ModelHandle): void;
  /** The GPU the next createModel and its uploads use (one process driving several GPUs). */
  setDevice(device: number): void;
  /**
   * Expert parallelism over models on distinct GPUs (native-cuda/src/model_ep.cu), after bind and
   * allocateKv: each keeps its contiguous slice of the routed experts; collective and blocking.
   */
  epEnable(models: ModelHandle[], opts?: { maxTokensLl?: number; maxTokensHt?: number }): void;
  /**
   * The same step on every EP rank (one thread each); rank 0's logits, ranks 1.. in `others`, and
   * whether all were bit-identical (split-K GEMMs add with fp32 atomics, so they may differ in the last bits).
   */
  epStep(models: ModelHandle[], meta: Int32Array, T: number, S: number, R: number): Promise<{ logits: Float32Array; others: Float32Array[]; ranksAgree: boolean }>;
  /** Frees the EP exchanges of every rank at once (NCCL teardown may wait for peers); call before free(). The models cannot step afterwards. */
  epRelease(models: ModelHandle[]): void;
  /** Sampled on the GPU (params as step's); rank 0's ids. */
  epStep(models: ModelHandle[], meta: Int32Array, T: number, S: number, R: number, params: Float64Array): Promise<{ ids: Int32Array; logprobs: Float32Array; others: Int32Array[]; ranksAgree: boolean }>;
  /**
   * One collective step with each rank's own sequences (data-parallel attention, each rank's own
   * KV): steps[r] is rank r's packed step; T = 0 (S = R = 0, empty meta) makes the rank only serve
   * its experts. With params on every rank that has tokens, tokens are sampled on the GPUs.
   */
  epStepRanks(models: ModelHandle[], steps: EpRankStep[]): Promise<{ ranks: EpRankOutput[] }>;
}

/** One rank's share of epStepRanks: pack-step.ts's packStep of that rank's sequences (and packSampling's params). */
export interface EpRankStep {
  meta: Int32Array;
  T: number;
  S: number;
  R: number;
  params?: Float64Array;
  /** Sampled steps: rows whose logits come back in hostLogits. */
  hostRows?: Int32Array;
}

/** One rank's output: logits [R, V], or (sampled steps) R ids and their raw log-probabilities. */
export interface EpRankOutput {
  logits?: Float32Array;
  ids?: Int32Array;
  logprobs?: Float32Array;
  hostLogits?: Float32Array;
}

export const CUDA_ADDON_PATH = join(import.meta.dir, "..", "..", "..", "native-cuda", "build", "Release", "dispatch_cuda.node");

let cached: { addon: CudaAddon | null; reason: string } | undefined;

/** The addon, or null with the reason (not built, failed to load). */
export function loadCudaAddon(): { addon: CudaAddon | null; reason: string } {
  if (cached) return cached;
  if (!existsSync(CUDA_ADDON_PATH)) {
    cached = { addon: null, reason: `the CUDA addon is not built (${CUDA_ADDON_PATH}; run bun scripts/build-native.ts where nvcc exists)` };
    return cached;
  }
  try {
    cached = { addon: createRequire(import.meta.url)(CUDA_ADDON_PATH) as CudaAddon, reason: "" };
  } catch (e) {
    cached = { addon: null, reason: `the CUDA addon failed to load: ${e instanceof Error ? e.message : String(e)}` };
  }
  return cached;
}

export type CudaProbe = { ok: true; addon: CudaAddon; device: DeviceInfo } | { ok: false; reason: string };

/** Whether the CUDA backend can run here, and why not. */
export function probeCuda(): CudaProbe {
  const { addon, reason } = loadCudaAddon();
  if (!addon) return { ok: false, reason };
  try {
    return { ok: true, addon, device: addon.deviceInfo() };
  } catch (e) {
    return { ok: false, reason: e instanceof Error ? e.message : String(e) };
  }
}
