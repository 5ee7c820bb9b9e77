/**
 * The EP serving runner's refusals that do not need GPUs. Its GPU behaviour (greedy tokens
 * against EP=1, idle ranks, the sampled path, serving) is checked on 2 H200s by
 * native-cuda/scripts/ep-dp-greedy.ts and bench/ep/ep-dp-serve-check.sh (docs/expert-parallelism.md).
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { probeCuda } from "../backend/cuda/native";
import { ModelLoadError } from "../loader/errors";
import { loadModel } from "../model/load-model";
import { createCudaEpRunner } from "./cuda-ep-runner";

const dir = join(import.meta.dir, "..", "..", "fixtures", "golden", "qwen3_moe");
const bundled = join(import.meta.dir, "..", "..", "models", "tiny-wordnet-moe");
const probe = probeCuda();
const gpus = probe.ok ? probe.device.count : 0;

test("without enough GPUs the EP runner refuses with a load error that says why", async () => {
  const err = await createCudaEpRunner({ dir, ranks: Math.max(2, gpus + 1) }).catch((e) => e);
  expect(err).toBeInstanceOf(ModelLoadError);
  expect(String(err.message)).toMatch(gpus === 0 ? /CUDA backend unavailable/ : /needs \d+ GPUs; this host has/);
});

test("bad EP settings are refused before any GPU work", async () => {
  await expect(createCudaEpRunner({ dir, ranks: 1 })).rejects.toThrow(/at least 2 ranks/);
  await expect(createCudaEpRunner({ dir, ranks: 2.5 })).rejects.toThrow(/at least 2 ranks/);
  await expect(createCudaEpRunner({ dir, ranks: 2, lowLatencyMaxTokens: 512, maxTokensPerRank: 256 })).rejects.toThrow(/low-latency EP steps need 1 <= 512 <= 256/);
  await expect(createCudaEpRunner({ dir, ranks: 2, lowLatencyMaxTokens: 0 })).rejects.toThrow(/low-latency EP steps/);
});

test("loadModel with ep > 1 on the CPU backend is a clear error", async () => {
  const err = await loadModel({ dir: bundled, backend: "cpu", ep: 2 }).catch((e) => e);
  expect(err).toBeInstanceOf(ModelLoadError);
  expect(String(err.message)).toContain("needs the CUDA backend");
});
