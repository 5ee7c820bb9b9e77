// bench/serving/eager_timeline.py on a small synthetic trace: increments under PDL overlap and idle gaps, graph
// launches left out, two runs side by side.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const SCRIPT = join(import.meta.dir, "eager_timeline.py");
const py = Bun.which("python3");
const HEADER = "start_ns,end_ns,graph_id,graph_node_id,grid,block,cluster,name";
const GEMM = "_ZN5dcuda3mma20sm90_bf16_gemm_wgmmaILi256EEEv14CUtensorMap_stS2_iiiiiiPKfPfb";
const POST = "_ZN5dcuda45_GLOBAL__N__edcfa0fe_12_fused_ops_cu_9556978815qkv_post_kernelILb0EEEvNS_11QkvPostArgsE";

function trace(lines: [number, number, number, string, string][]): string {
  return [HEADER, ...lines.map(([s, e, g, grid, name]) => `${s},${e},${g},0,${grid},128x1x1,0x0x0,${name}`)].join("\n");
}

test.skipIf(!py)("each launch counts from the later of its start and the previous end; graph launches are left out", () => {
  const dir = mkdtempSync(join(tmpdir(), "eager-timeline-"));
  try {
    // run a: GEMM 0-100 us; qkv_post starts at 40 (PDL) and ends at 130: +30; an idle gap to 500; GEMM 500-600: +100;
    // qkv_post 590-650: +50; a graph's kernel (left out) in between
    const a = trace([
      [0, 100_000, 0, "132x1x1", GEMM],
      [40_000, 130_000, 0, "40x1x1", POST],
      [200_000, 210_000, 7, "1x1x1", GEMM],
      [500_000, 600_000, 0, "132x1x1", GEMM],
      [590_000, 650_000, 0, "40x1x1", POST],
    ]);
    const b = trace([
      [0, 100_000, 0, "132x1x1", GEMM],
      [100_000, 120_000, 0, "40x1x1", POST],
    ]);
    writeFileSync(join(dir, "a.csv"), a);
    writeFileSync(join(dir, "b.csv"), b);
    const r = spawnSync(py!, [SCRIPT, `a=${join(dir, "a.csv")}`, `b=${join(dir, "b.csv")}`], { encoding: "utf8" });
    expect(r.status).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/a med us .* b med us/);
    const gemm = lines.find((l) => l.includes("132x1x1"))!;
    const post = lines.find((l) => l.includes("40x1x1"))!;
    expect(lines.some((l) => l.includes("1x1x1 "))).toBe(false); // the graph's launch
    // GEMM: a 100 us twice (sum 0.20 ms), b 100 us once; qkv_post: a median of 30 and 50 = 40, b 20
    expect(gemm.split(/\s+/).slice(-6)).toEqual(["100.0", "2", "0.20", "100.0", "1", "0.10"]);
    expect(post.split(/\s+/).slice(-6)).toEqual(["40.0", "2", "0.08", "20.0", "1", "0.02"]);
    if (Bun.which("c++filt")) {
      expect(gemm.startsWith("sm90_bf16_gemm_wgmma<256>")).toBe(true);
      expect(post.startsWith("qkv_post_kernel<false>")).toBe(true);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test.skipIf(!py)("no run named: the usage, exit status not 0", () => {
  const r = spawnSync(py!, [SCRIPT], { encoding: "utf8" });
  expect(r.status).not.toBe(0);
  expect(r.stderr).toContain("Usage");
});
