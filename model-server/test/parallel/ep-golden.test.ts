/**
 * Expert parallelism end to end on the golden fixture models: EP=2 and EP=4
 * loopback ranks (worker threads, shared-memory transport, CPU backend) run the
 * fixture's prompts through the real runner contract (golden-check: scrambled
 * block tables, batched chunked prefill, batched greedy decoding) and must give
 * the reference logits (<= 1e-4, as EP=1 does) and the identical greedy tokens.
 * lowLatencyMaxTokens 4 makes prefill steps run high-throughput and decode
 * steps low-latency, so both modes are exercised (checked through the stats).
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { loadNativeKernels } from "../../src/backend/cpu/native";
import { checkGolden } from "../../src/model/testing/golden-check";
import { createEpCpuRunner } from "../../src/parallel/ep-cpu-runner";

const FIXTURES = join(import.meta.dir, "..", "..", "fixtures", "golden");

const cases: { arch: string; ranks: number; placement?: number[][]; label: string; native?: boolean }[] = [
  { arch: "deepseek_moe", ranks: 2, label: "even" },
  { arch: "deepseek_moe", ranks: 2, placement: [[0, 1, 2], [3, 4, 5, 6, 7]], label: "uneven 3/5" },
  { arch: "deepseek_moe", ranks: 4, label: "even" },
  { arch: "deepseek_moe", ranks: 4, placement: [[0, 7], [3], [1, 2, 4, 5], [6, 5]], label: "scattered, expert 5 replicated" },
  { arch: "qwen2_moe", ranks: 2, label: "even" },
  { arch: "qwen2_moe", ranks: 4, label: "even" },
  { arch: "mixtral", ranks: 2, label: "even" },
  { arch: "mixtral", ranks: 4, label: "one expert per rank" },
];
// The native CPU kernels too where the addon is built (the same kernels on both sides of the comparison).
if (loadNativeKernels()) cases.push({ arch: "deepseek_moe", ranks: 2, label: "native kernels", native: true }, { arch: "qwen3_moe", ranks: 4, label: "native kernels", native: true });

describe("expert parallelism on the golden models (CPU loopback ranks)", () => {
  for (const c of cases) {
    test(`${c.arch} EP=${c.ranks} (${c.label}): reference logits, identical greedy tokens`, async () => {
      const dir = join(FIXTURES, c.arch);
      const runner = await createEpCpuRunner({ dir, ranks: c.ranks, placement: c.placement, native: c.native ?? false, lowLatencyMaxTokens: 4, timeoutMs: 10_000 });
      try {
        await checkGolden(runner, dir, 1e-4, () => join(dir, "expected.safetensors"));
        const ht = runner.stats.reduce((n, s) => n + s.htCalls, 0);
        const ll = runner.stats.reduce((n, s) => n + s.llCalls, 0);
        expect(ht).toBeGreaterThan(0);
        expect(ll).toBeGreaterThan(0);
        // Every rank took part in every MoE call (collective), and expert rows were spread over ranks.
        expect(new Set(runner.stats.map((s) => s.htCalls + s.llCalls)).size).toBe(1);
        expect(runner.stats.filter((s) => s.rowsComputed > 0).length).toBeGreaterThan(1);
      } finally {
        runner.close();
      }
    }, 30_000);
  }
});
