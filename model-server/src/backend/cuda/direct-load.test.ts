/**
 * Direct loading assembles exactly the tensors the fp32 loader path builds, for every fixture
 * architecture and both expert layouts. The addon is replaced by a recorder that performs the
 * same byte-range reads in TypeScript (no GPU here); the device side of uploadRanges is covered
 * by the golden fixtures on the GPU, which load directly by default.
 */
import { describe, expect, test } from "bun:test";
import { closeSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import { openCheckpoint } from "../../loader/checkpoint";
import { readModelConfig } from "../../model/cpu-runner";
import { loadWeights } from "../../model/weights";
import { createCudaWeightSink, toNativeWeights } from "./cuda-weights";
import { canLoadDirect, createDirectLoad } from "./direct-load";
import type { CudaAddon, ModelHandle, NativeModelWeights } from "./native";

const FIXTURES = join(import.meta.dir, "..", "..", "..", "fixtures", "golden");

function bf16Round(x: Float32Array): Float32Array {
  const out = new Float32Array(x);
  const u = new Uint32Array(out.buffer);
  for (let i = 0; i < u.length; i++) u[i] = (u[i]! + 0x7fff + ((u[i]! >>> 16) & 1)) & 0xffff0000;
  return out;
}

/** Records uploads as fp32 arrays (rounded to bf16 where the device would hold bf16). */
function recorder() {
  const bufs: Float32Array[] = [];
  const put = (x: Float32Array, bf16: boolean) => bufs.push(bf16 ? bf16Round(x) : new Float32Array(x)) - 1;
  const addon = {
    upload: (_m: ModelHandle, data: Float32Array, asBf16: boolean) => put(data, asBf16),
    uploadRanges(_m: ModelHandle, files: string[], ranges: Float64Array, n: number, asBf16: boolean) {
      const out = new Float32Array(n);
      let at = 0;
      for (let i = 0; i < ranges.length; i += 4) {
        const [file, begin, end, dtype] = [ranges[i]!, ranges[i + 1]!, ranges[i + 2]!, ranges[i + 3]!];
        const bytes = new Uint8Array(end - begin);
        const fd = openSync(files[file]!, "r");
        readSync(fd, bytes, 0, bytes.length, begin);
        closeSync(fd);
        if (dtype === 0) {
          out.set(new Float32Array(bytes.buffer), at);
          at += bytes.length / 4;
        } else if (dtype === 2) {
          const h = new Uint16Array(bytes.buffer);
          const u = new Uint32Array(h.length);
          for (let j = 0; j < h.length; j++) u[j] = h[j]! << 16;
          out.set(new Float32Array(u.buffer), at);
          at += h.length;
        } else {
          throw new Error("F16 not in the fixtures");
        }
      }
      expect(at).toBe(n);
      return put(out, asBf16);
    },
  } as unknown as CudaAddon;
  return { addon, bufs };
}

function flatIds(w: NativeModelWeights): [string, number][] {
  const out: [string, number][] = [["embed", w.embed], ["norm", w.norm], ["lmHead", w.lmHead]];
  w.layers.forEach((l, i) => {
    for (const [k, v] of Object.entries(l)) if (typeof v === "number" && v >= 0) out.push([`layers.${i}.${k}`, v]);
  });
  return out;
}

describe("direct loading", () => {
  for (const arch of ["mixtral", "mixtral-memory-layout", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_moe"]) {
    test(`${arch}: the same tensors as the fp32 loader path`, () => {
      const dir = join(FIXTURES, arch);
      const config = readModelConfig(dir);
      const model = {} as ModelHandle;
      const a = recorder();
      const ckptA = openCheckpoint(dir);
      expect(canLoadDirect(config, ckptA)).toBe(true);
      let read = 0;
      const direct = createDirectLoad(ckptA, a.addon, model);
      direct.ckpt.onRead = (n) => (read += n);
      const wa = toNativeWeights(loadWeights(config, direct.ckpt, direct.sink), direct.sink);
      const b = recorder();
      const sinkB = createCudaWeightSink(b.addon, model);
      const wb = toNativeWeights(loadWeights(config, openCheckpoint(dir), sinkB), sinkB);
      const ia = flatIds(wa);
      const ib = flatIds(wb);
      expect(ia.map(([k]) => k)).toEqual(ib.map(([k]) => k));
      for (let i = 0; i < ia.length; i++) {
        const [name, idA] = ia[i]!;
        expect({ name, data: Array.from(a.bufs[idA]!) }).toEqual({ name, data: Array.from(b.bufs[ib[i]![1]]!) });
      }
      expect(read).toBeGreaterThan(0);
    });
  }

  test("a missing tensor or a wrong shape is refused by name, as the fp32 path does", () => {
    const dir = join(FIXTURES, "qwen3_moe");
    const { ckpt } = createDirectLoad(openCheckpoint(dir), recorder().addon, {} as ModelHandle);
    expect(() => ckpt.load("model.layers.0.nope.weight")).toThrow("missing tensor model.layers.0.nope.weight");
    expect(() => ckpt.load("model.norm.weight", [3])).toThrow("expected [3]");
  });
});
