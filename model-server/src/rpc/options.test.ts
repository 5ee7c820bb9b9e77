import { expect, test } from "bun:test";
import { batchLimits, OptionsError, parseOptions, stepTimeoutS, usage } from "./options";

/** The OptionsError message parseOptions throws for argv (fails the test when it does not throw). */
function err(argv: string[]): string {
  try {
    parseOptions(argv, {});
  } catch (e) {
    expect(e).toBeInstanceOf(OptionsError);
    return (e as Error).message;
  }
  throw new Error("expected an error");
}

test("defaults, flags, --x=y form, and environment with flags winning", () => {
  const o = parseOptions(["--model", "m", "--port=9000", "--kv-blocks", "64"], { DISPATCH_MS_PORT: "1234", DISPATCH_MS_BLOCK_SIZE: "32", POD_NAME: "pod-1" });
  expect(o).toMatchObject({ model: "m", port: 9000, host: "127.0.0.1", blockSize: 32, kvBlocks: 64, maxQueue: 256, backend: "cpu", serverId: "pod-1", grpcPort: undefined });
  expect(parseOptions([], { DISPATCH_MODEL_PATH: "/models/x" }).model).toBe("/models/x");
  expect(parseOptions([], { DISPATCH_MS_MODEL: "a", DISPATCH_MODEL_PATH: "b" }).model).toBe("a");
});

test("bad flags are clear errors", () => {
  expect(err([])).toContain("--model <dir> is required");
  expect(err(["--model", "m", "--prot", "1"])).toContain("unknown flag --prot");
  expect(err(["--model", "m", "--port", "abc"])).toContain('--port must be a whole number, got "abc"');
  expect(err(["--model", "m", "--port", "70000"])).toContain("<= 65535");
  expect(err(["--model", "m", "--block-size", "0"])).toContain("--block-size must be >= 1");
  expect(err(["--model", "m", "--backend", "tpu"])).toContain("cpu or cuda");
  expect(err(["--model"])).toContain("--model needs a value");
  expect(err(["--model", "m", "stray"])).toContain('unexpected argument "stray"');
  expect(err(["--model", "m", "--max-num-seqs", "64", "--max-batch-tokens", "32"])).toContain("must be >= --max-num-seqs");
  for (const bad of ["0", "1.5", "-0.2", "abc", "NaN"]) expect(err(["--model", "m", "--kv-gpu-share", bad])).toContain(`--kv-gpu-share must be a number in (0, 1]`);
  expect(parseOptions(["--help"], {}).help).toBe(true);
  expect(usage()).toContain("DISPATCH_MS_KV_BLOCKS");
});

test("KV sizing flags: --kv-gpu-share defaults to 0.9, --kv-memory-mb is unset unless given", () => {
  expect(parseOptions(["--model", "m"], {})).toMatchObject({ kvGpuShare: 0.9, kvMemoryMb: undefined, kvBlocks: undefined });
  expect(parseOptions(["--model", "m", "--kv-gpu-share", "0.5"], {}).kvGpuShare).toBe(0.5);
  expect(parseOptions(["--model", "m", "--kv-gpu-share=1"], { DISPATCH_MS_KV_GPU_SHARE: "0.3" }).kvGpuShare).toBe(1);
  expect(parseOptions(["--model", "m"], { DISPATCH_MS_KV_GPU_SHARE: "0.3", DISPATCH_MS_KV_MEMORY_MB: "64" })).toMatchObject({ kvGpuShare: 0.3, kvMemoryMb: 64 });
  expect(usage()).toContain("DISPATCH_MS_KV_GPU_SHARE");
});

test("the step timeout: 60 s on CUDA and none on the CPU unless --step-timeout-s or its variable sets it (0: none)", () => {
  const o = parseOptions(["--model", "m"], {});
  expect(o.stepTimeoutS).toBeUndefined();
  expect(stepTimeoutS(o.stepTimeoutS, "cuda")).toBe(60);
  expect(stepTimeoutS(o.stepTimeoutS, "cpu")).toBe(0);
  const set = parseOptions(["--model", "m", "--step-timeout-s", "5"], { DISPATCH_MS_STEP_TIMEOUT_S: "9" });
  expect([stepTimeoutS(set.stepTimeoutS, "cuda"), stepTimeoutS(set.stepTimeoutS, "cpu")]).toEqual([5, 5]);
  expect(stepTimeoutS(parseOptions(["--model", "m"], { DISPATCH_MS_STEP_TIMEOUT_S: "0" }).stepTimeoutS, "cuda")).toBe(0);
  expect(err(["--model", "m", "--step-timeout-s", "-1"])).toContain("--step-timeout-s must be a whole number");
  expect(usage()).toContain("DISPATCH_MS_STEP_TIMEOUT_S");
});

test("batch limits follow the backend unless the flags set them", () => {
  const o = parseOptions(["--model", "m"], {});
  expect(o.maxNumSeqs).toBeUndefined();
  expect(batchLimits(o, "cpu")).toEqual({ maxNumSeqs: 32, maxBatchTokens: 256 });
  expect(batchLimits(o, "cuda")).toEqual({ maxNumSeqs: 256, maxBatchTokens: 8192 });
  expect(batchLimits(parseOptions(["--model", "m", "--max-num-seqs", "64"], {}), "cpu")).toEqual({ maxNumSeqs: 64, maxBatchTokens: 256 });
  expect(batchLimits(parseOptions(["--model", "m", "--max-num-seqs", "512"], {}), "cpu")).toEqual({ maxNumSeqs: 512, maxBatchTokens: 512 });
  expect(batchLimits(parseOptions(["--model", "m", "--max-batch-tokens", "16"], {}), "cuda")).toEqual({ maxNumSeqs: 16, maxBatchTokens: 16 });
  expect(() => batchLimits({ maxNumSeqs: 64, maxBatchTokens: 32 }, "cuda")).toThrow(OptionsError);
});

test("--ep: off by default, needs --backend cuda, and its low-latency share fits a step", () => {
  expect(parseOptions(["--model", "m"], {})).toMatchObject({ ep: 1, epLowLatencyTokens: 128 });
  expect(parseOptions(["--model", "m", "--backend", "cuda", "--ep", "2"], {})).toMatchObject({ ep: 2, backend: "cuda" });
  expect(parseOptions(["--model", "m", "--ep-low-latency-tokens", "64"], { DISPATCH_MS_EP: "4", DISPATCH_MS_BACKEND: "cuda" })).toMatchObject({ ep: 4, epLowLatencyTokens: 64 });
  expect(err(["--model", "m", "--ep", "2"])).toContain("--ep 2 needs --backend cuda");
  expect(err(["--model", "m", "--backend", "auto", "--ep", "2"])).toContain("got --backend auto");
  expect(err(["--model", "m", "--backend", "cuda", "--ep", "0"])).toContain("--ep must be >= 1");
  expect(err(["--model", "m", "--backend", "cuda", "--ep", "2", "--max-batch-tokens", "64", "--max-num-seqs", "64"])).toContain("--ep-low-latency-tokens (128) must be <= --max-batch-tokens");
  expect(usage()).toContain("DISPATCH_MS_EP");
});

test("--int8-experts: flag or DISPATCH_MS_INT8_EXPERTS, CUDA only, not with --ep", () => {
  expect(parseOptions(["--model", "m"], {}).int8Experts).toBe(false);
  expect(parseOptions(["--model", "m", "--backend", "cuda", "--int8-experts"], {}).int8Experts).toBe(true);
  expect(parseOptions(["--model", "m", "--backend", "auto"], { DISPATCH_MS_INT8_EXPERTS: "1" }).int8Experts).toBe(true);
  expect(parseOptions(["--model", "m", "--backend", "cuda"], { DISPATCH_MS_INT8_EXPERTS: "false" }).int8Experts).toBe(false);
  expect(() => parseOptions(["--model", "m", "--backend", "cuda"], { DISPATCH_MS_INT8_EXPERTS: "yes" })).toThrow('must be 1, 0, true or false, got "yes"');
  expect(err(["--model", "m", "--int8-experts"])).toContain("--int8-experts needs --backend cuda");
  expect(err(["--model", "m", "--backend", "cuda", "--ep", "2", "--int8-experts"])).toContain("not supported with --ep 2");
  expect(usage()).toContain("DISPATCH_MS_INT8_EXPERTS");
});

test("--sync-decode: flag or DISPATCH_MS_SYNC_DECODE; off by default", () => {
  expect(parseOptions(["--model", "m"], {}).syncDecode).toBe(false);
  expect(parseOptions(["--model", "m", "--sync-decode"], {}).syncDecode).toBe(true);
  expect(parseOptions(["--model", "m"], { DISPATCH_MS_SYNC_DECODE: "1" }).syncDecode).toBe(true);
  expect(() => parseOptions(["--model", "m"], { DISPATCH_MS_SYNC_DECODE: "yes" })).toThrow(/sync-decode/);
});

test("--served-model-name: flag or DISPATCH_MS_SERVED_MODEL_NAME; a blank or padded name refused", () => {
  expect(parseOptions(["--model", "m"], {}).servedModelName).toBeUndefined();
  expect(parseOptions(["--model", "m", "--served-model-name", "org/name"], {}).servedModelName).toBe("org/name");
  expect(parseOptions(["--model", "m"], { DISPATCH_MS_SERVED_MODEL_NAME: "x" }).servedModelName).toBe("x");
  expect(err(["--model", "m", "--served-model-name", " x"])).toContain("--served-model-name must be a name");
  expect(usage()).toContain("DISPATCH_MS_SERVED_MODEL_NAME");
});
