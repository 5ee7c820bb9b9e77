/**
 * What the CPU runners (in-thread `cpu-runner.ts`, `worker-runner.ts`, and the
 * expert-parallel `parallel/ep-cpu-runner.ts`) share about the runner contract:
 * the spec they report, the size of an f32 KV block, KV export/import with its
 * checks, the shape in which KV storage crosses to a worker thread, and how a
 * step's logits come back from one (one transferable buffer plus lengths).
 *
 * @example
 * const kv = allocateCpuKv(config, 64, 16);
 * const out = exportCpuKvBlocks(kv, Int32Array.of(0, 1));
 * importCpuKvBlocks(kv, Int32Array.of(2, 3), out);
 * worker.postMessage({ op: "attachKv", kv: sharedCpuKv(kv) }); // worker side: cpuKvFromShared(m.kv)
 */
import { CpuKv, exportCpuKv, importCpuKv } from "../backend/cpu/cpu-backend";
import type { ModelConfig } from "./config";
import type { KvExport, ModelSpec } from "./runner";

/** The `ModelRunner.spec` for a loaded config. */
export function modelSpec(config: ModelConfig): ModelSpec {
  return {
    modelId: config.modelId,
    architecture: config.architecture,
    vocabSize: config.vocabSize,
    maxContext: config.maxContext,
    numLayers: config.numLayers,
    eosTokenIds: config.eosTokenIds,
  };
}

/** Bytes of one fp32 KV block: K and V for every layer, `blockSize` x Hkv x D each. */
export function cpuKvBytesPerBlock(config: ModelConfig, blockSize: number): number {
  return config.numLayers * 2 * blockSize * config.numKvHeads * config.headDim * 4;
}

/** The given blocks as the contract's f32 KvExport; an Error while the runner has no cache yet. */
export function exportCpuKvBlocks(kv: CpuKv | null, blockIds: Int32Array): KvExport {
  if (!kv) throw new Error("allocateKv() must be called before exportKv()");
  return { numBlocks: blockIds.length, blockSize: kv.blockSize, data: exportCpuKv(kv, blockIds), dtype: "f32" };
}

/**
 * Copies an export into the given blocks; an Error while the runner has no
 * cache yet, a RangeError unless it is f32 blocks of this cache's size, one per id.
 */
export function importCpuKvBlocks(kv: CpuKv | null, blockIds: Int32Array, data: KvExport): void {
  if (!kv) throw new Error("allocateKv() must be called before importKv()");
  if (data.dtype !== "f32" || data.blockSize !== kv.blockSize || data.numBlocks !== blockIds.length) {
    throw new RangeError(`importKv: got ${data.numBlocks} ${data.dtype} blocks of ${data.blockSize}, expected ${blockIds.length} f32 blocks of ${kv.blockSize}`);
  }
  importCpuKv(kv, blockIds, data.data);
}

/** KV storage as posted to a worker (its arrays are SharedArrayBuffer views, so both threads see one cache). */
export interface SharedCpuKv {
  numLayers: number;
  numBlocks: number;
  blockSize: number;
  numKvHeads: number;
  headDim: number;
  k: Float32Array[];
  v: Float32Array[];
}

export function sharedCpuKv(kv: CpuKv): SharedCpuKv {
  return { numLayers: kv.numLayers, numBlocks: kv.numBlocks, blockSize: kv.blockSize, numKvHeads: kv.numKvHeads, headDim: kv.headDim, k: kv.k, v: kv.v };
}

/** The worker side: a CpuKv over the posted storage (a RangeError if the arrays do not match the shape). */
export function cpuKvFromShared(s: SharedCpuKv): CpuKv {
  return new CpuKv(s.numLayers, s.numBlocks, s.blockSize, s.numKvHeads, s.headDim, { k: s.k, v: s.v });
}

/** A step's logits as posted back from a worker: one buffer (transferable) and each row's length. */
export interface PackedStepOutput {
  buffer: ArrayBuffer;
  lengths: number[];
}

export function packStepOutput(out: readonly Float32Array[]): PackedStepOutput {
  const lengths = out.map((o) => o.length);
  const packed = new Float32Array(lengths.reduce((a, b) => a + b, 0));
  let at = 0;
  for (const o of out) {
    packed.set(o, at);
    at += o.length;
  }
  return { buffer: packed.buffer, lengths };
}

/** The rows of a packed output, in order, as views on its buffer. */
export function unpackStepOutput(p: PackedStepOutput): Float32Array[] {
  const all = new Float32Array(p.buffer);
  const out: Float32Array[] = [];
  let at = 0;
  for (const n of p.lengths) {
    out.push(all.subarray(at, at + n));
    at += n;
  }
  return out;
}
