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
        // swapped tails: 420 us (1.06x the default, 0.82x dense) on 266 row tiles (1.039x dense's)
        row(
          "qwen3-30b-a3b",
          { ...base, variant_contiguous_staged: 446, cublas_dense: 346, variant_contiguous_swap_tails: 420 },
          { row_tiles: 286, row_tiles_swap: 266 },
        ),
        // no row_tiles (results before session 21): "-" in the column; 0.95x dense
        row("mixtral-8x7b", { ...base, variant_contiguous_staged: 400, cublas_dense: 380, variant_contiguous_swap_tails: 370 }),
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
    // swapped tails: the padding with them, their speedup over the default and the counts
    const head = lines.find((l) => l.startsWith("shape"))!.split(/\s+/);
    for (const c of ["spad", "swt", "dns/swt"]) expect(head).toContain(c);
    expect(qwen).toContain(" 1.04x ");
    expect(qwen).toContain(" 1.06x ");
    expect(mixtral).toContain(" 1.08x ");
    const targets = lines.find((l) => l.startsWith("targets"))!;
    expect(targets).toContain("swt_faster 2/2");
    expect(targets).toContain("swt_dense_0.9x 1/2");
    expect(targets).toContain("swapped tails median 1.081x, range 1.06-1.08x");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
