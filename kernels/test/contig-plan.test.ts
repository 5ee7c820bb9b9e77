import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KERNELS_DIR } from "./helpers";

// The prefill grouped GEMM's plan (src/gemm/contig_plan.h: the ping-pong or the cooperative kernel, half tails, the
// tile schedule) is host code: built with g++ and run here, no GPU needed (test/contig_plan_test.cpp holds the cases).
const gxx = spawnSync("g++", ["--version"]).status === 0;

test.skipIf(!gxx)("the prefill grouped GEMM's plan picks the kernel and tile options by shape and switches", () => {
  const dir = mkdtempSync(join(tmpdir(), "contig-plan-"));
  try {
    const bin = join(dir, "contig_plan_test");
    const build = spawnSync(
      "g++",
      ["-std=c++17", "-Wall", "-Werror", `-I${join(KERNELS_DIR, "src")}`, join(KERNELS_DIR, "test", "contig_plan_test.cpp"), "-o", bin],
      { encoding: "utf8", timeout: 120_000 },
    );
    if (build.status !== 0) console.error(`${build.stdout}${build.stderr}`.slice(-3000));
    expect(build.status).toBe(0);
    const run = spawnSync(bin, [], { encoding: "utf8", timeout: 30_000 });
    if (run.status !== 0) console.error(`${run.stdout}${run.stderr}`);
    expect(run.stdout).toMatch(/^all \d+ checks pass$/m);
    expect(run.status).toBe(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 150_000);
