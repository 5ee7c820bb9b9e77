/**
 * A ModelRunner on the CPU backend: loads a Hugging Face model directory
 * (config.json + safetensors) into fp32, holds the paged KV cache, runs steps.
 *
 * @example
 *   const runner = await createCpuRunner({ dir: "model-server/models/tiny-wordnet-moe" });
 *   runner.allocateKv(64, 16);
 *   const [logits] = await runner.forward({ seqs: [{ tokens, startPos: 0, blockTable, numLogits: 1 }] });
 */
import { existsSync, readFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { CpuKv, createCpuBackend } from "../backend/cpu/cpu-backend";
import { openCheckpoint } from "../loader/checkpoint";
import { ModelLoadError } from "../loader/errors";
import { parseHfConfig } from "../loader/hf-config";
import { createProgress } from "../loader/progress";
import type { ModelConfig } from "./config";
import { cpuKvBytesPerBlock, exportCpuKvBlocks, importCpuKvBlocks, modelSpec } from "./cpu-runner-common";
import { createMoeModel } from "./moe-model";
import type { ModelRunner, StepInput, StepOutput } from "./runner";
import { loadWeights } from "./weights";

export interface CpuRunnerOptions {
  dir: string;
  /** Model id reported to clients; defaults to the directory's name. */
  modelId?: string;
  /** Use native kernels when built (default true). */
  native?: boolean;
  /** More EOS ids (e.g. the tokenizer's eos token). */
  extraEosIds?: number[];
  /** Load progress messages (a bar is drawn on a terminal regardless). */
  onProgress?: (message: string) => void;
  /** Draw the progress bar on stderr; defaults to whether stderr is a terminal. */
  progressBar?: boolean;
}

export interface CpuModelRunner extends ModelRunner {
  readonly config: ModelConfig;
  /** Whether the native kernels are in use. */
  readonly native: boolean;
  /** Synchronous forward (benchmarks, tests, the worker). */
  forwardSync(step: StepInput): StepOutput;
  /** Use KV storage allocated elsewhere (the worker runner shares it with the engine's thread). */
  attachKv(kv: CpuKv): void;
}

/** KV storage for a model: per layer, [blocks, B, Hkv, D] for K and V, in SharedArrayBuffers. */
export function allocateCpuKv(config: ModelConfig, numBlocks: number, blockSize: number): CpuKv {
  if (!(numBlocks > 0 && blockSize > 0)) throw new RangeError(`allocateKv(${numBlocks}, ${blockSize}): both must be positive`);
  return new CpuKv(config.numLayers, numBlocks, blockSize, config.numKvHeads, config.headDim);
}

/** Reads config.json (+ generation_config.json's eos ids) into a ModelConfig. */
export function readModelConfig(dir: string, modelId?: string, extraEosIds: number[] = []): ModelConfig {
  const file = join(dir, "config.json");
  if (!existsSync(file)) throw new ModelLoadError("missing_file", `${file} not found`);
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch {
    throw new ModelLoadError("bad_file", `${file} is not valid JSON`);
  }
  const gen = join(dir, "generation_config.json");
  const genEos: number[] = [];
  if (existsSync(gen)) {
    try {
      const g = JSON.parse(readFileSync(gen, "utf8")).eos_token_id;
      if (typeof g === "number") genEos.push(g);
      else if (Array.isArray(g)) genEos.push(...g.filter((x: unknown) => typeof x === "number"));
    } catch {
      throw new ModelLoadError("bad_file", `${gen} is not valid JSON`);
    }
  }
  return parseHfConfig(raw, { modelId: modelId ?? basename(resolve(dir)), extraEosIds: [...genEos, ...extraEosIds] });
}

export async function createCpuRunner(o: CpuRunnerOptions): Promise<CpuModelRunner> {
  const config = readModelConfig(o.dir, o.modelId, o.extraEosIds);
  const ckpt = openCheckpoint(o.dir);
  const be = createCpuBackend({ native: o.native });
  const progress = createProgress({ total: ckpt.totalBytes, label: `loading ${config.modelId}`, onProgress: o.onProgress, tty: o.progressBar });
  ckpt.onRead = (n) => progress.advance(n);
  const weights = loadWeights(config, ckpt, be);
  progress.done();
  if (weights.unused.length > 0) {
    const list = weights.unused.slice(0, 5).join(", ");
    o.onProgress?.(`warning: ${weights.unused.length} checkpoint tensors unused (${list}${weights.unused.length > 5 ? ", ..." : ""})`);
  }
  const model = createMoeModel(config, weights, be);
  let kv: CpuKv | null = null;
  let closed = false;

  const forwardSync = (step: StepInput): StepOutput => {
    if (closed) throw new Error("runner is closed");
    if (!kv) throw new Error("allocateKv() must be called before forward()");
    return model.forward(step, kv);
  };

  return {
    config,
    native: be.native,
    backend: "cpu",
    spec: modelSpec(config),
    allocateKv(numBlocks, blockSize) {
      kv = null; // drop the old cache before allocating the new one
      kv = allocateCpuKv(config, numBlocks, blockSize);
    },
    attachKv(storage) {
      kv = new CpuKv(config.numLayers, storage.numBlocks, storage.blockSize, config.numKvHeads, config.headDim, storage);
    },
    kvBytesPerBlock: (bs) => cpuKvBytesPerBlock(config, bs),
    async forward(step) {
      // Yield once so callers' pending I/O runs before this step's compute.
      await new Promise<void>((r) => setImmediate(r));
      return forwardSync(step);
    },
    forwardSync,
    exportKv: (blockIds) => exportCpuKvBlocks(kv, blockIds),
    importKv: (blockIds, data) => importCpuKvBlocks(kv, blockIds, data),
    close() {
      closed = true;
      kv = null;
    },
  };
}
