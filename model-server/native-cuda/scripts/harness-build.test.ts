import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// The GPU harnesses (attention, prefill, GEMV, dense GEMM, router-logit, fused q|k|v epilogue checks) only run on the GPU machine;
// CI builds each with the nvcc command its script uses, so a build break shows up here.
const nvcc = spawnSync("nvcc", ["--version"]).status === 0;
const HARNESSES = ["attention-check", "prefill-check", "gemv-check", "gemm-bench", "router-check", "qkv-gemm-check"];

describe.skipIf(!nvcc)("GPU check harnesses build with nvcc (sm_90a)", () => {
  for (const name of HARNESSES) {
    test(name, () => {
      const dir = mkdtempSync(join(tmpdir(), "harness-"));
      try {
        const r = spawnSync("bash", [join(import.meta.dir, `${name}.sh`)], {
          env: { ...process.env, HARNESS_BUILD_ONLY: "1", TMPDIR: dir, OUT: "" },
          encoding: "utf8",
          timeout: 600_000,
        });
        const out = `${r.stdout}${r.stderr}`;
        if (r.status !== 0) console.error(out.slice(-3000));
        expect(out).toContain("== built (HARNESS_BUILD_ONLY=1)");
        expect(r.status).toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }, 620_000);
  }
});

// tools/tlb_probe.cu (a stand-alone read-cost probe, docs/cuda-backend.md "Session 13 runs"): the command in its header.
test.skipIf(!nvcc)("tools/tlb_probe.cu builds with nvcc (sm_90a)", () => {
  const dir = mkdtempSync(join(tmpdir(), "tlb-probe-"));
  try {
    const r = spawnSync("nvcc", ["-gencode=arch=compute_90a,code=sm_90a", "-O3", "-std=c++17", "-o", join(dir, "tlb_probe"), join(import.meta.dir, "..", "tools", "tlb_probe.cu")], { encoding: "utf8", timeout: 300_000 });
    if (r.status !== 0) console.error(`${r.stdout}${r.stderr}`.slice(-3000));
    expect(r.status).toBe(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 320_000);
