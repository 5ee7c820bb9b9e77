// CI gate: every CUDA source compiles with the nvcc on this machine (sm_90a). About 10 s on 2 cores.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { KERNELS_DIR } from "./helpers";

function cudaSources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? cudaSources(join(dir, d.name)) : d.name.endsWith(".cu") ? [join(dir, d.name)] : []);
}

const nvcc = spawnSync("nvcc", ["--version"]).status === 0;

test.skipIf(!nvcc)("every .cu compiles for sm_90a (incl. the off-by-one mutation build and bench/kernels harnesses)", async () => {
  const out = join(KERNELS_DIR, "build", "ci");
  mkdirSync(out, { recursive: true });
  // kernels/src (plain and mutated GEMMs) and the standalone GPU harnesses of bench/kernels
  const harnesses = cudaSources(join(KERNELS_DIR, "..", "bench", "kernels"));
  const jobs = [...cudaSources(join(KERNELS_DIR, "src")), ...harnesses]
    .flatMap((src): [string, string[]][] => [[src, []], [src, ["-DDK_MUTATE_EXPERT_OFF_BY_ONE"]]])
    .filter(([src, defs]) => defs.length === 0 || src.includes("/gemm/"));
  const compile = ([src, defs]: [string, string[]]) => new Promise<string>((resolve) => {
    const obj = join(out, `${src.split("/").pop()}${defs.length ? ".mut" : ""}.o`);
    const p = Bun.spawn(["nvcc", "-std=c++17", "-O3", "-gencode=arch=compute_90a,code=sm_90a", ...defs,
      "-c", src, "-o", obj], { stderr: "pipe" });
    p.exited.then(async (code) => resolve(code === 0 ? "" : `${src}: ${await new Response(p.stderr).text()}`));
  });
  const errors: string[] = [];
  for (let i = 0; i < jobs.length; i += 2) errors.push(...(await Promise.all(jobs.slice(i, i + 2).map(compile))));
  expect(errors.filter(Boolean)).toEqual([]);
}, 180_000);
