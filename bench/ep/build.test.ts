/**
 * bench/ep on a machine without GPUs: build.sh builds ep_bench (NCCL and p2p backends) and
 * nvlink_ceiling; the p2p sources compile warning-free for sm_90a; ep_bench refuses bad flags with
 * exit 2 and a message, and without a GPU stops with exit 2 instead of crashing. The GPU run is
 * bench/ep/device.sh (docs/expert-parallelism.md).
 */
import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");
const EP = join(ROOT, "model-server", "native-ep");
const nvcc = spawnSync("nvcc", ["--version"]).status === 0;
const gpu = spawnSync("nvidia-smi", ["-L"]).status === 0;
const ncclInc = existsSync("/usr/include/nccl.h") ? "/usr/include" : join(EP, "third_party", "nccl");

async function exec(cmd: string[], timeoutMs: number): Promise<{ code: number; out: string; err: string }> {
  const p = Bun.spawn(cmd, { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => p.kill(), timeoutMs);
  const [code, out, err] = await Promise.all([p.exited, new Response(p.stdout).text(), new Response(p.stderr).text()]);
  clearTimeout(timer);
  return { code, out, err };
}

describe.skipIf(!nvcc)("bench/ep build", () => {
  const dir = mkdtempSync(join(tmpdir(), "ep-bench-"));
  const bin = join(dir, "ep_bench");

  test("build.sh builds ep_bench and nvlink_ceiling", async () => {
    const r = await exec(["bash", "bench/ep/build.sh", dir], 280_000);
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    expect(r.out.trim().split("\n").at(-1)).toBe(bin);
    expect(existsSync(bin)).toBe(true);
    expect(existsSync(join(dir, "nvlink_ceiling"))).toBe(true);
  }, 300_000);

  test("the p2p sources compile for sm_90a with warnings as errors", async () => {
    const cuda = ["nvcc", "-std=c++17", "-O2", `-I${ncclInc}`, `-I${join(EP, "src")}`, "-gencode=arch=compute_90a,code=sm_90a", "-Xcompiler", "-Wall,-Wextra", "-Werror", "all-warnings"];
    const jobs = [
      [...cuda, "-c", join(EP, "src", "ep_p2p_kernels.cu"), "-o", join(dir, "p2p_kernels.o")],
      [...cuda, "-x", "cu", "-c", join(EP, "src", "ep_p2p.cpp"), "-o", join(dir, "p2p.o")],
    ];
    const results = await Promise.all(jobs.map((j) => exec(j, 200_000)));
    expect(results.map((r) => (r.code === 0 ? "" : r.err))).toEqual(["", ""]);
  }, 220_000);

  test("ep_bench refuses bad flags with exit 2 and says why", async () => {
    if (!existsSync(bin)) throw new Error("ep_bench was not built");
    const cases: [string[], RegExp][] = [
      [["--backend", "shm"], /--backend must be nccl or p2p/],
      [["--ll-wire", "rows"], /--ll-wire must be capacity or tokens/],
      [["--backend", "p2p", "--ll-wire", "tokens"], /--ll-wire applies to --backend nccl only/],
      [["--tokens", "-1"], /--tokens must not be negative/],
      [["--iters", "1"], /--iters >= 2/],
      [["--hidden", "100"], /--hidden % 8 == 0/],
      [["--gpus"], /flag --gpus needs a value/],
      [["--frobnicate", "1"], /unknown flag --frobnicate/],
    ];
    for (const [args, why] of cases) {
      const r = await exec([bin, ...args], 20_000);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(why);
    }
  }, 60_000);

  test.skipIf(gpu)("without a GPU ep_bench stops with exit 2 and a CUDA error, not a crash", async () => {
    if (!existsSync(bin)) throw new Error("ep_bench was not built");
    for (const backend of ["nccl", "p2p"]) {
      const r = await exec([bin, "--backend", backend, "--gpus", "2"], 20_000);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(/ep_bench: .*cudaGetDeviceCount/);
    }
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);
});
