/**
 * A ModelRunner on the CUDA backend: the same config reader and weight loader as the CPU
 * runner, weights streamed to the GPU tensor by tensor, and each step run whole on the device
 * by the addon (native-cuda/src/model.cu) — one upload of step metadata, one download of logits,
 * decode steps replayed from CUDA graphs. docs/cuda-backend.md explains why the step is native
 * rather than the op-level Backend that model/moe-model.ts drives on the CPU. A directory with
 * random-weights.json (bench/serving/random-model.ts) gets weights generated on the GPU.
 *
 * @example
 *   const runner = await createCudaRunner({ dir: "model-server/fixtures/golden/qwen3_moe" });
 *   runner.allocateKv(64, 16);
 *   const [logits] = await runner.forward({ seqs: [{ tokens, startPos: 0, blockTable, numLogits: 1 }] });
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ModelConfig } from "./config";
import { readModelConfig } from "./cpu-runner";
import type { KvExport, ModelRunner, StepInput, StepOutput } from "./runner";
import { loadWeights } from "./weights";
import { openCheckpoint } from "../loader/checkpoint";
import { ModelLoadError } from "../loader/errors";
import { createProgress } from "../loader/progress";
import { createCudaWeightSink, toNativeWeights } from "../backend/cuda/cuda-weights";
import { canLoadDirect, createDirectLoad } from "../backend/cuda/direct-load";
import { probeCuda, type CudaAddon, type DeviceInfo, type ModelHandle } from "../backend/cuda/native";
import { toNativeConfig } from "../backend/cuda/native-config";
import { layerWeightBytes, randomNativeWeights } from "../backend/cuda/random-weights";
import { chainTokens, packDeviceSampling, packStep, splitLogits, splitSampled, tokenCounts } from "../backend/cuda/pack-step";

export interface CudaRunnerOptions {
  dir: string;
  /** Model id reported to clients; defaults to the directory's name. */
  modelId?: string;
  extraEosIds?: number[];
  onProgress?: (message: string) => void;
  /** Largest decode batch captured as a CUDA graph (default 256; 0 turns graphs off). */
  graphMaxBatch?: number;
  /** Routed experts as int8 weight-only (default: DISPATCH_CUDA_INT8_EXPERTS=1, else bf16). */
  int8Experts?: boolean;
  /**
   * One-token steps run each MoE layer without a shared expert (o projection to the next input norm) as one kernel
   * (native-cuda/src/moe_block.cu). Default: DISPATCH_CUDA_MOE_BLOCK=1 (off otherwise: slower than the chain on the H200); tests set both.
   */
  moeBlock?: boolean;
  /**
   * One-token steps' gate|up GEMM routes itself from the router logits (kernels/src/gemm: moe_gate_up_self_routed)
   * instead of a routing kernel before it. Default: DISPATCH_CUDA_SELF_ROUTE (on unless 0); tests set it.
   */
  selfRoute?: boolean;
  /**
   * Read tensors from the files straight to the GPU (default true; DISPATCH_CUDA_DIRECT_LOAD=0
   * turns it off): no value passes through JavaScript. Otherwise, and for checkpoints that need a
   * transpose, tensors go through the CPU loader's fp32 arrays.
   */
  directLoad?: boolean;
}

/** Sampling of one sequence on the GPU (see native-cuda/src/sampling.cu). */
export interface GpuSampling {
  /** <= 0: greedy. */
  temperature: number;
  /** 0: no limit. */
  topK: number;
  /** 1: no limit. */
  topP: number;
  /** An integer in [0, 2^53) (the addon reads it through a double); engine/rng.ts gpuSeed folds a u64. */
  seed: number;
  /** Index of the sequence's next output token (one draw per seed and step). */
  step: number;
  /** Ids that may not be drawn now (EOS and stop ids before min_tokens), at most 8. */
  banned?: number[];
  /** OpenAI's frequency and presence penalties (0 or absent: none), over the generated tokens below. */
  frequencyPenalty?: number;
  presencePenalty?: number;
  /** The generated tokens the host has counted: (token, count) pairs, each token once. */
  penalties?: Int32Array;
  /**
   * The sequence's one token in this step counts as generated once more: a chained step (its token is the id the
   * step before sampled, which the host has not counted yet).
   */
  penalizeInput?: boolean;
  /** How many of the raw distribution's best ids to report with their log-probabilities (0-20). */
  topLogprobs?: number;
  /**
   * true: this sequence is sampled on the host (speculative verification, or what the device does not take):
   * its logits rows come back in SampledRows.logits and the fields above are ignored. The other
   * sequences of the step stay on the GPU, so one such request does not download the whole batch.
   */
  host?: boolean;
}

/** One sequence's sampled tokens (one per logits row) and their raw log-probabilities; a host-sampled sequence's logits instead. */
export interface SampledRows {
  ids: Int32Array;
  logprobs: Float32Array;
  /** GpuSampling.topLogprobs > 0: per row, the raw distribution's best ids and log-probabilities, best first. */
  top?: { token: number; logprob: number }[][];
  /** Host-sampled sequences (GpuSampling.host): [numLogits, V] fp32; ids and logprobs are then not meaningful. */
  logits?: Float32Array;
}

export interface CudaModelRunner extends ModelRunner {
  /**
   * forward() with the tokens sampled on the GPU: one id (and its raw log-probability) per logits
   * row, no logits downloaded; with samplingExtras, also penalties and top log-probabilities.
   */
  forwardSampled(step: StepInput, sampling: GpuSampling[], chain?: Int32Array): Promise<SampledRows[]>;
  /** Whether forwardSampled takes penalties and top log-probabilities (GpuSampling); else the host samples those. */
  readonly samplingExtras: boolean;
  /**
   * forwardSampled may be called again before the previous call resolves (two steps in flight: the second is
   * enqueued behind the first on the GPU), and `chain` (one entry per sequence: -1, or the logits row of the
   * previous sampled step whose id is this sequence's one token) lets such a step continue tokens the host has not
   * seen yet. The engine overlaps decode steps with this (engine/lookahead.ts).
   */
  readonly chainsSampled: true;
  readonly config: ModelConfig;
  /** The CPU runner's flag (native CPU kernels); always false here, kept so both runners share one shape. */
  readonly native: false;
  readonly device: DeviceInfo;
  /** The addon's model handle (multi-GPU drivers: addon.epEnable / epStep, native-cuda/scripts/ep-greedy.ts). */
  readonly handle: ModelHandle;
  /** Bytes of weights on the device. */
  readonly weightBytes: number;
  /** Device memory free now. */
  freeDeviceBytes(): number;
  /** KV blocks that fit in `share` of the free device memory (keeps room for scratch). */
  kvBlocksForShare(share: number, blockSize: number): number;
  /** Decode batch sizes captured as graphs so far. */
  graphsCaptured(): number;
  /** Runs the step once eagerly with events between op groups: GPU ms per group (benchmarks). */
  profileStep(step: StepInput): Record<string, number>;
}

function graphMaxBatch(o?: number): number {
  const env = process.env.DISPATCH_CUDA_GRAPH_MAX_BATCH;
  const v = o ?? (env !== undefined ? Number(env) : 256);
  if (!Number.isInteger(v) || v < 0) throw new RangeError(`graph max batch must be a non-negative integer, got ${v}`);
  return v;
}

/** Loads a Hugging Face model directory onto the GPU. Throws (code NO_CUDA_DEVICE in the message) without one. */
export async function createCudaRunner(o: CudaRunnerOptions): Promise<CudaModelRunner> {
  const probe = probeCuda();
  if (!probe.ok) throw new ModelLoadError("unsupported_model", `CUDA backend unavailable: ${probe.reason}`);
  const config = readModelConfig(o.dir, o.modelId, o.extraEosIds);
  const addon = probe.addon;
  const randomFile = join(o.dir, "random-weights.json");
  const random = existsSync(randomFile) ? (JSON.parse(readFileSync(randomFile, "utf8")) as { seed?: number; zipf?: number; int8Experts?: boolean }) : null;
  const int8Experts = o.int8Experts ?? (random?.int8Experts || process.env.DISPATCH_CUDA_INT8_EXPERTS === "1");
  const model = addon.createModel(toNativeConfig(config, { int8Experts, moeBlock: o.moeBlock, selfRoute: o.selfRoute }));
  if (random) {
    // a benchmark directory (bench/serving/random-model.ts): weights generated on the GPU
    try {
      o.onProgress?.(`generating random weights for ${config.modelId} on ${probe.device.name} (seed ${random.seed ?? 1}, zipf ${random.zipf ?? 0})`);
      let total = 0;
      for (let i = 0; i < config.numLayers; i++) total += layerWeightBytes(config, i);
      const progress = createProgress({ total, label: `random weights for ${config.modelId}`, onProgress: o.onProgress });
      addon.bind(model, randomNativeWeights(addon, model, config, random.seed ?? 1, { zipf: random.zipf ?? 0, onProgress: (i) => progress.advance(layerWeightBytes(config, i)) }));
      progress.done();
    } catch (e) {
      addon.free(model);
      throw e;
    }
    return createCudaRunnerOn(config, addon, model, probe.device, graphMaxBatch(o.graphMaxBatch));
  }
  try {
    const ckpt = openCheckpoint(o.dir);
    const progress = createProgress({ total: ckpt.totalBytes, label: `loading ${config.modelId} to ${probe.device.name}`, onProgress: o.onProgress });
    const direct = (o.directLoad ?? process.env.DISPATCH_CUDA_DIRECT_LOAD !== "0") && canLoadDirect(config, ckpt);
    const { ckpt: source, sink } = direct ? createDirectLoad(ckpt, addon, model) : { ckpt, sink: createCudaWeightSink(addon, model) };
    source.onRead = (n) => progress.advance(n);
    const weights = loadWeights(config, source, sink);
    progress.done();
    if (weights.unused.length > 0) o.onProgress?.(`warning: ${weights.unused.length} checkpoint tensors unused (${weights.unused.slice(0, 5).join(", ")})`);
    addon.bind(model, toNativeWeights(weights, sink));
  } catch (e) {
    addon.free(model);
    throw e;
  }
  return createCudaRunnerOn(config, addon, model, probe.device, graphMaxBatch(o.graphMaxBatch));
}

/** A runner over a model whose weights are already bound (createCudaRunner, or random weights for benchmarks). */
export function createCudaRunnerOn(config: ModelConfig, addon: CudaAddon, model: ModelHandle, device: DeviceInfo, graphs = 64): CudaModelRunner {
  addon.setGraphs(model, graphs);
  let kv: { numBlocks: number; blockSize: number; stride: number } | null = null;
  const samplingExtras = addon.samplingExtras(model);
  let closed = false;
  const live = () => {
    if (closed) throw new Error("runner is closed");
  };

  return {
    config,
    device,
    backend: "cuda",
    native: false,
    handle: model,
    weightBytes: addon.weightBytes(model),
    spec: {
      modelId: config.modelId,
      architecture: config.architecture,
      vocabSize: config.vocabSize,
      maxContext: config.maxContext,
      numLayers: config.numLayers,
      eosTokenIds: config.eosTokenIds,
    },
    freeDeviceBytes: () => addon.deviceInfo().freeBytes,
    kvBlocksForShare(share, blockSize) {
      if (!(share > 0 && share <= 1)) throw new RangeError(`KV share must be in (0, 1], got ${share}`);
      return Math.floor((addon.deviceInfo().freeBytes * share) / addon.kvBytesPerBlock(model, blockSize));
    },
    graphsCaptured: () => addon.graphsCaptured(model),
    profileStep(step) {
      live();
      if (!kv) throw new Error("allocateKv() must be called before profileStep()");
      const p = packStep(step, { blockSize: kv.blockSize, numBlocks: kv.numBlocks, stride: kv.stride, vocabSize: config.vocabSize, maxContext: config.maxContext });
      return addon.profileStep(model, p.meta, p.T, p.S, p.R);
    },
    allocateKv(numBlocks, blockSize) {
      live();
      if (numBlocks <= 0 || blockSize <= 0) throw new RangeError(`allocateKv(${numBlocks}, ${blockSize}): both must be positive`);
      kv = null;
      const stride = addon.allocateKv(model, numBlocks, blockSize);
      kv = { numBlocks, blockSize, stride };
    },
    kvBytesPerBlock: (blockSize) => addon.kvBytesPerBlock(model, blockSize),
    async forward(step: StepInput): Promise<StepOutput> {
      live();
      if (!kv) throw new Error("allocateKv() must be called before forward()");
      const p = packStep(step, { blockSize: kv.blockSize, numBlocks: kv.numBlocks, stride: kv.stride, vocabSize: config.vocabSize, maxContext: config.maxContext });
      if (p.T === 0) return step.seqs.map(() => new Float32Array(0));
      const logits = await addon.step(model, p.meta, p.T, p.S, p.R);
      return splitLogits(logits, p.logitCounts, config.vocabSize);
    },
    chainsSampled: true,
    samplingExtras,
    async forwardSampled(step, sampling, chain) {
      live();
      if (!kv) throw new Error("allocateKv() must be called before forward()");
      if (sampling.length !== step.seqs.length) throw new RangeError(`${sampling.length} sampling entries for ${step.seqs.length} sequences`);
      const p = packStep(step, { blockSize: kv.blockSize, numBlocks: kv.numBlocks, stride: kv.stride, vocabSize: config.vocabSize, maxContext: config.maxContext });
      if (p.T === 0) return step.seqs.map(() => ({ ids: new Int32Array(0), logprobs: new Float32Array(0) }));
      const { params, hostRows, penalties } = packDeviceSampling(sampling, p.logitCounts, p.R, config.vocabSize, tokenCounts(step));
      if ((penalties.length > 0 || sampling.some((s) => !s.host && ((s.topLogprobs ?? 0) > 0 || s.penalizeInput))) && !samplingExtras) {
        throw new RangeError("this model's GPU sampler takes no penalties or top log-probabilities (samplingExtras is false)");
      }
      const tokenChain = chain ? chainTokens(step, chain, p.T) : undefined;
      const out = await addon.step(model, p.meta, p.T, p.S, p.R, params, hostRows.length > 0 ? hostRows : undefined, tokenChain, penalties.length > 0 ? penalties : undefined);
      return splitSampled(out, sampling, p.logitCounts, config.vocabSize);
    },
    exportKv(blockIds): KvExport {
      live();
      if (!kv) throw new Error("allocateKv() must be called before exportKv()");
      return { numBlocks: blockIds.length, blockSize: kv.blockSize, data: addon.exportKv(model, blockIds, kv.blockSize), dtype: "bf16" };
    },
    importKv(blockIds, data) {
      live();
      if (!kv) throw new Error("allocateKv() must be called before importKv()");
      if (data.dtype !== "bf16" || data.blockSize !== kv.blockSize || data.numBlocks !== blockIds.length) {
        throw new RangeError(`importKv: got ${data.numBlocks} ${data.dtype} blocks of ${data.blockSize}, expected ${blockIds.length} bf16 blocks of ${kv.blockSize}`);
      }
      if (data.data.byteLength !== blockIds.length * addon.kvBytesPerBlock(model, kv.blockSize)) throw new RangeError(`importKv: ${data.data.byteLength} bytes for ${blockIds.length} blocks`);
      addon.importKv(model, blockIds, data.data);
    },
    close() {
      if (closed) return;
      closed = true;
      kv = null;
      addon.free(model);
    },
  };
}

