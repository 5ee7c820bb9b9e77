import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// The prefill attention's tile plan (src/flash_plan.cu: which kernel, rows per tile, the tiles) is host code: built
// with nvcc and run here, no GPU needed (scripts/flash_plan_test.cu holds the cases).
const nvcc = spawnSync("nvcc", ["--version"]).status === 0;

test.skipIf(!nvcc)("the prefill attention's tile plan picks the kernel and rows by the step's shape", () => {
  const dir = mkdtempSync(join(tmpdir(), "flash-plan-"));
  try {
    const root = join(import.meta.dir, "..");
    const bin = join(dir, "flash_plan_test");
    const build = spawnSync(
      "nvcc",
      ["-std=c++17", `-I${join(root, "src")}`, `-I${join(root, "..", "..", "kernels", "src")}`, join(root, "scripts", "flash_plan_test.cu"), join(root, "src", "flash_plan.cu"), "-o", bin],
      { encoding: "utf8", timeout: 300_000 },
    );
    if (build.status !== 0) console.error(`${build.stdout}${build.stderr}`.slice(-3000));
    expect(build.status).toBe(0);
    const run = spawnSync(bin, [], { encoding: "utf8", timeout: 60_000 });
    if (run.status !== 0) console.error(`${run.stdout}${run.stderr}`);
    expect(run.stdout).toMatch(/^all \d+ checks pass$/m);
    expect(run.status).toBe(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 320_000);
