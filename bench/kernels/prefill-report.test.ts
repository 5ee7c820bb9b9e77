// bench/kernels/prefill_report.py on a small synthetic result: the padding column and the target counts.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const SCRIPT = join(import.meta.dir, "prefill_report.py");
const py = Bun.which("python3");

function row(model: string, us: Record<string, number>, extra: Record<string, unknown> = {}) {
  return { model, proj: "gate_up", tokens: 4096, routing: "uniform", rows: 32768, flops: 2 * 32768 * 1536 * 2048, us, ...extra };
}

test.skipIf(!py)("the prefill table shows the row tiles over dense's rows and counts the 0.9x-dense rows", () => {
  const dir = mkdtempSync(join(tmpdir(), "prefill-report-"));
  try {
    const path = join(dir, "bench.json");
    const base = { variant_contiguous_static_full: 460, torch_grouped_mm: 520 }; // no other ratio of qwen's row is 1.12x
    const doc = {
      device: "NVIDIA H200",
      torch: "2.11",
      date_utc: "2026-12-03 13:00",
      dense_bf16_8192_tflops: 790,
      rows: [
        // 286 row tiles (half tails as half) for 256 tiles of rows: 1.117x the dense GEMM's MMA work; 0.78x dense
        row("qwen3-30b-a3b", { ...base, variant_contiguous_staged: 446, cublas_dense: 346 }, { row_tiles: 286 }),
        // no row_tiles (results before session 21): "-" in the column; 0.95x dense
        row("mixtral-8x7b", { ...base, variant_contiguous_staged: 400, cublas_dense: 380 }),
        row("olmoe", { ...base, variant_contiguous_staged: 400, cublas_dense: 380 }, { tokens: 1024 }), // below 4,096
      ],
    };
    writeFileSync(path, JSON.stringify(doc));
    const r = spawnSync(py!, [SCRIPT, path], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    const lines = r.stdout.split("\n");
    expect(lines.find((l) => l.startsWith("shape"))!.split(/\s+/)).toContain("pad");
    const qwen = lines.find((l) => l.startsWith("qwen3"))!;
    const mixtral = lines.find((l) => l.startsWith("mixtral"))!;
    expect(lines.some((l) => l.startsWith("olmoe"))).toBe(false);
    // the time cells hold spaces ("us (TFLOP/s)"), so the padding cell is found by its value
    expect(qwen).toContain(" 1.12x ");
    expect(mixtral.split(/\s+/)).toContain("-");
    expect(lines.find((l) => l.startsWith("targets"))).toContain("new_dense_0.9x 1/2");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
