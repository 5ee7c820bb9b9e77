import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { chooseKvBlocks, KvSizingError } from "./kv-sizing";
import { loadModel, type LoadedModel } from "./model/load-model";
import type { ModelRunner } from "./model/runner";

const DIR = join(import.meta.dir, "..", "models", "tiny-wordnet-moe");
let m: LoadedModel;
beforeAll(async () => {
  m = await loadModel({ dir: DIR, backend: "cpu", worker: false });
});
afterAll(() => {
  m.runner.close();
  m.tokenizer.free();
});

/**
 * The real CPU runner given the CUDA runner's memory query over a stated amount of free device
 * memory (cuda-runner.ts computes floor(free * share / kvBytesPerBlock) the same way); the
 * calls it gets are recorded. The CUDA runner itself needs a GPU.
 */
function withDeviceMemory(inner: ModelRunner, freeBytes: number) {
  const calls: [number, number][] = [];
  return Object.assign(Object.create(inner) as ModelRunner, {
    calls,
    freeDeviceBytes: () => freeBytes,
    kvBlocksForShare(share: number, blockSize: number) {
      calls.push([share, blockSize]);
      return Math.floor((freeBytes * share) / inner.kvBytesPerBlock(blockSize));
    },
  });
}

test("CPU: --kv-blocks, else --kv-memory-mb (default 512), never less than one full context", () => {
  const per = m.runner.kvBytesPerBlock(16);
  expect(chooseKvBlocks({ blockSize: 16, kvBlocks: 7, kvGpuShare: 0.9 }, m.runner, 1024)).toEqual({ blocks: 7, source: "--kv-blocks" });
  expect(chooseKvBlocks({ blockSize: 16, kvGpuShare: 0.9 }, m.runner, 16).blocks).toBe(Math.floor((512 * 2 ** 20) / per));
  expect(chooseKvBlocks({ blockSize: 16, kvMemoryMb: 2, kvGpuShare: 0.9 }, m.runner, 16).blocks).toBe(Math.floor((2 * 2 ** 20) / per));
  // 1 MB holds fewer blocks than a 1024-token context: one context it is
  const small = chooseKvBlocks({ blockSize: 16, kvMemoryMb: 1, kvGpuShare: 0.9 }, m.runner, 1024 * 1024 * 64);
  expect(small.blocks).toBe(Math.ceil((1024 * 1024 * 64) / 16));
  expect(small.source).toContain("one full context");
});

test("device memory: --kv-gpu-share of the free memory unless --kv-blocks or --kv-memory-mb is given", () => {
  const per = m.runner.kvBytesPerBlock(16);
  const r = withDeviceMemory(m.runner, 10_000 * per);
  const k = chooseKvBlocks({ blockSize: 16, kvGpuShare: 0.9 }, r, 1024);
  expect(k.blocks).toBe(9000);
  expect(k.source).toContain("0.9 of the free device memory");
  expect(r.calls).toEqual([[0.9, 16]]);
  expect(chooseKvBlocks({ blockSize: 16, kvGpuShare: 0.5 }, r, 1024).blocks).toBe(5000);
  expect(chooseKvBlocks({ blockSize: 16, kvGpuShare: 0.5, kvMemoryMb: 1 }, r, 1024)).toEqual({ blocks: Math.floor(2 ** 20 / per), source: "--kv-memory-mb 1" });
  expect(chooseKvBlocks({ blockSize: 16, kvGpuShare: 0.5, kvBlocks: 3 }, r, 1024).blocks).toBe(3);
  expect(r.calls.length).toBe(2);
  // less than a context: served, and said; nothing at all: a clear error
  expect(chooseKvBlocks({ blockSize: 16, kvGpuShare: 0.001 }, r, 1024).source).toContain("fewer than one full context");
  expect(() => chooseKvBlocks({ blockSize: 16, kvGpuShare: 0.5 }, withDeviceMemory(m.runner, per), 1024)).toThrow(KvSizingError);
  expect(() => chooseKvBlocks({ blockSize: 16, kvGpuShare: 0.5 }, withDeviceMemory(m.runner, per), 1024)).toThrow(/no room for the KV cache/);
  expect(() => chooseKvBlocks({ blockSize: 16, kvGpuShare: 1.5 }, r, 1024)).toThrow(/\(0, 1\]/);
});
