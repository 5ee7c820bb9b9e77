/**
 * How many KV blocks the model server allocates, in order: `--kv-blocks`; `--kv-memory-mb`
 * when given; on a runner that knows its device memory (CUDA: `kvBlocksForShare`),
 * `--kv-gpu-share` (default 0.9) of the memory free after the weights are loaded, as vLLM's
 * gpu_memory_utilization; otherwise 512 MB. A budget never gives less than one full context on
 * the CPU; on the GPU the free memory is a hard limit, so fewer blocks than a context only
 * shorten the served context (the engine caps it at the KV capacity), and none is an error.
 *
 * @example
 * chooseKvBlocks({ kvGpuShare: 0.9, blockSize: 16 }, cudaRunner, 40960);
 * // { blocks: 260000, source: "0.9 of the free device memory" }
 */
import type { ModelRunner } from "./model/runner";

export interface KvSizingOptions {
  blockSize: number;
  kvBlocks?: number;
  kvMemoryMb?: number;
  /** (0, 1]; used on runners with kvBlocksForShare. */
  kvGpuShare: number;
}

/** The CUDA runner's extra: blocks that fit in a share of the device memory free now. */
type DeviceMemoryRunner = ModelRunner & { kvBlocksForShare(share: number, blockSize: number): number; freeDeviceBytes?(): number };

export const DEFAULT_KV_MEMORY_MB = 512;

export class KvSizingError extends Error {
  override name = "KvSizingError";
}

export function chooseKvBlocks(o: KvSizingOptions, runner: ModelRunner, maxContext: number): { blocks: number; source: string } {
  if (o.kvBlocks !== undefined) return { blocks: o.kvBlocks, source: "--kv-blocks" };
  const fullContext = Math.ceil(maxContext / o.blockSize);
  const device = typeof (runner as DeviceMemoryRunner).kvBlocksForShare === "function" ? (runner as DeviceMemoryRunner) : null;
  if (device && o.kvMemoryMb === undefined) {
    if (!(o.kvGpuShare > 0 && o.kvGpuShare <= 1)) throw new KvSizingError(`--kv-gpu-share must be in (0, 1], got ${o.kvGpuShare}`);
    const blocks = device.kvBlocksForShare(o.kvGpuShare, o.blockSize);
    const free = device.freeDeviceBytes?.();
    const freeText = free !== undefined ? ` (${(free / 2 ** 30).toFixed(1)} GiB free after the weights)` : "";
    if (blocks < 1) {
      throw new KvSizingError(`no room for the KV cache: ${o.kvGpuShare} of the free device memory${freeText} holds no block of ${o.blockSize} tokens; raise --kv-gpu-share or free the device`);
    }
    const short = blocks < fullContext ? `; fewer than one full context (${fullContext} blocks), so the served context is ${blocks * o.blockSize} tokens` : "";
    return { blocks, source: `${o.kvGpuShare} of the free device memory${freeText}${short}` };
  }
  const mb = o.kvMemoryMb ?? DEFAULT_KV_MEMORY_MB;
  const fromMemory = Math.floor((mb * 1024 * 1024) / Math.max(1, runner.kvBytesPerBlock(o.blockSize)));
  if (device) {
    if (fromMemory < 1) throw new KvSizingError(`--kv-memory-mb ${mb} holds no KV block of ${o.blockSize} tokens (${runner.kvBytesPerBlock(o.blockSize)} bytes each)`);
    return { blocks: fromMemory, source: `--kv-memory-mb ${mb}` };
  }
  return fromMemory >= fullContext ? { blocks: fromMemory, source: `${mb} MB` } : { blocks: fullContext, source: `one full context (${mb} MB holds ${fromMemory} blocks)` };
}
