/**
 * native-ep on this machine (no GPU, no NCCL): every source compiles with nvcc for sm_90a
 * (the CUDA file and the NCCL backend through nvcc, the loader and the N-API binding with g++), against the
 * system nccl.h where there is one and third_party/nccl/nccl.h (declarations only)
 * otherwise; the bench harness too. Where the addon is built, it loads without NCCL and
 * says so instead of failing. GPU runs: docs/expert-parallelism.md.
 */
import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { loadNativeEp } from "../../src/parallel/native-ep";

const ROOT = join(import.meta.dir, "..", "..", "..");
const EP = join(ROOT, "model-server", "native-ep");
const OUT = join(EP, "build", "ci");
const nvcc = spawnSync("nvcc", ["--version"]).status === 0;
const ncclInc = existsSync("/usr/include/nccl.h") ? "/usr/include" : join(EP, "third_party", "nccl");
const napiInc = [join(ROOT, "node_modules", "node-addon-api"), join(ROOT, "node_modules", "node-api-headers", "include")];

function run(cmd: string[]): Promise<string> {
  const p = Bun.spawn(cmd, { stderr: "pipe", stdout: "pipe" });
  return p.exited.then(async (code) => (code === 0 ? "" : `${cmd.join(" ")}\n${await new Response(p.stderr).text()}`));
}

describe("native-ep", () => {
  test.skipIf(!nvcc)("sources and the bench harness compile with nvcc (sm_90a) and g++", async () => {
    mkdirSync(OUT, { recursive: true });
    const common = ["-std=c++17", "-O2", `-I${ncclInc}`, `-I${join(EP, "src")}`];
    const cuda = ["nvcc", ...common, "-gencode=arch=compute_90a,code=sm_90a", "-Xcompiler", "-Wall", "-Werror", "all-warnings"];
    const jobs = [
      [...cuda, "-c", join(EP, "src", "ep_kernels.cu"), "-o", join(OUT, "ep_kernels.o")],
      [...cuda, "-x", "cu", "-c", join(EP, "src", "ep_nccl.cpp"), "-o", join(OUT, "ep_nccl.cu.o")],
      ["g++", ...common, "-Wall", "-Werror", "-I/usr/local/cuda/include", "-c", join(EP, "src", "nccl_loader.cpp"), "-o", join(OUT, "nccl_loader.o")],
      ["g++", ...common, "-Wall", "-Werror", "-fPIC", "-DNAPI_VERSION=8", "-DNAPI_CPP_EXCEPTIONS", "-I/usr/local/cuda/include", ...napiInc.map((i) => `-I${i}`), "-c", join(EP, "src", "binding.cpp"), "-o", join(OUT, "binding.o")],
      [...cuda, "-c", join(ROOT, "bench", "ep", "ep_bench.cu"), "-o", join(OUT, "ep_bench.o")],
    ];
    const errors: string[] = [];
    for (let i = 0; i < jobs.length; i += 2) errors.push(...(await Promise.all(jobs.slice(i, i + 2).map(run))));
    expect(errors.filter(Boolean)).toEqual([]);
  }, 120_000);

  const ep = loadNativeEp();
  test.skipIf(!ep)("the built addon loads without NCCL/DeepEP and reports why they are unavailable", () => {
    const v = ep!.ncclVersion();
    if (existsSync("/usr/include/nccl.h")) return; // a machine with NCCL: the GPU run checks it
    expect(v.version).toBe(0);
    expect(v.error).toMatch(/libnccl not found/);
    const d = ep!.deepEp();
    expect(d.available).toBe(false);
    expect(d.error).toMatch(/libdispatch_ep_deepep\.so/);
    let err: unknown;
    try {
      ep!.uniqueId();
    } catch (e) {
      err = e;
    }
    expect((err as { code?: string }).code).toBe("DEP_NATIVE");
    expect(String((err as Error).message)).toMatch(/libnccl not found/);
  });
});
