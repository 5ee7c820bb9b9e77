/**
 * Failure paths of the expert-parallel CPU runner: a step that one rank rejects (bad block id)
 * comes back as that rank's clear error (not the abort it causes in its peers), the rank waiting
 * in the collective is released at once (not after its 20 s timeout), and the runner then refuses
 * further steps. (Awaited with .then, not expect().rejects: in Bun 1.4.5 the latter does not let
 * worker messages in while it waits.)
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { createEpCpuRunner } from "../../src/parallel/ep-cpu-runner";

const DIR = join(import.meta.dir, "..", "..", "fixtures", "golden", "deepseek_moe");

test("a bad step fails with the rank's error, bounded in time, and the group is then closed for use", async () => {
  const runner = await createEpCpuRunner({ dir: DIR, ranks: 2, native: false, timeoutMs: 20_000 });
  try {
    runner.allocateKv(8, 4);
    const ok = await runner.forward({ seqs: [{ tokens: Int32Array.of(1, 2, 3), startPos: 0, blockTable: Int32Array.of(0), numLogits: 1 }] });
    expect(ok[0]!.length).toBe(runner.spec.vocabSize);
    // blockTable[0] = 1 -> rank 1, whose block 99 is outside the cache; rank 0's sequence is fine.
    const t0 = Date.now();
    const bad = runner.forward({
      seqs: [
        { tokens: Int32Array.of(4), startPos: 3, blockTable: Int32Array.of(0), numLogits: 1 },
        { tokens: Int32Array.of(5, 6, 7, 8, 9), startPos: 0, blockTable: Int32Array.of(1, 99), numLogits: 1 },
      ],
    });
    const err = await bad.then(() => null, (e: unknown) => e);
    expect(String(err)).toMatch(/rank 1: block id 99 outside the cache's 8 blocks/);
    expect(Date.now() - t0).toBeLessThan(5_000);
    const again = await runner.forward({ seqs: [{ tokens: Int32Array.of(1), startPos: 0, blockTable: Int32Array.of(2), numLogits: 1 }] }).then(() => null, (e: unknown) => e);
    expect(String(again)).toMatch(/block id 99/);
  } finally {
    runner.close();
  }
}, 20_000);
