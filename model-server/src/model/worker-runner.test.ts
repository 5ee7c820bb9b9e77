import { expect, test } from "bun:test";
import { join } from "node:path";
import { loadModel } from "./load-model";
import { checkGolden } from "./testing/golden-check";
import { createWorkerRunner } from "./worker-runner";

/** The rejection of a promise settled by a worker message (expect().rejects does not wait for macrotasks in bun test). */
async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected a rejection");
}

const GOLDEN = join(import.meta.dir, "..", "..", "fixtures", "golden");
const BUNDLED = join(import.meta.dir, "..", "..", "models", "tiny-wordnet-moe");

test("the worker runner passes the golden check (deepseek_moe) like the in-thread one", async () => {
  const r = await createWorkerRunner({ dir: join(GOLDEN, "deepseek_moe") });
  expect(r.spec.architecture).toBe("deepseek_moe");
  const d = await checkGolden(r, join(GOLDEN, "deepseek_moe"), 1e-4, () => join(GOLDEN, "deepseek_moe", "expected.safetensors"));
  expect(d).toBeLessThanOrEqual(1e-4);
  r.close();
});

test("the event loop keeps running while a step computes in the worker", async () => {
  const m = await loadModel({ dir: BUNDLED });
  m.runner.allocateKv(40, 16);
  const tokens = Int32Array.from({ length: 600 }, (_, i) => (i * 37) % 4000);
  let ticks = 0;
  const timer = setInterval(() => ticks++, 1);
  const t0 = performance.now();
  await m.runner.forward({ seqs: [{ tokens, startPos: 0, blockTable: Int32Array.from({ length: 40 }, (_, i) => i), numLogits: 1 }] });
  const ms = performance.now() - t0;
  clearInterval(timer);
  // A blocked loop would tick at most once or twice around the await.
  expect(ticks).toBeGreaterThan(Math.min(5, ms / 4));
  m.runner.close();
  m.tokenizer.free();
});

test("worker errors come back as rejections; KV export/import work on shared storage; close rejects later calls", async () => {
  const r = await createWorkerRunner({ dir: join(GOLDEN, "olmoe") });
  expect((await rejection(r.forward({ seqs: [] }))).message).toMatch(/allocateKv/);
  r.allocateKv(6, 4);
  const bad = await rejection(r.forward({ seqs: [{ tokens: Int32Array.of(1, 999), startPos: 0, blockTable: Int32Array.of(0), numLogits: 1 }] }));
  expect(bad).toBeInstanceOf(RangeError);
  expect(bad.message).toMatch(/token id 999 outside/);
  const p = Int32Array.from([3, 1, 4, 1, 5, 9, 2]);
  await r.forward({ seqs: [{ tokens: p, startPos: 0, blockTable: Int32Array.of(0, 1), numLogits: 1 }] });
  r.importKv(Int32Array.of(4, 5), r.exportKv(Int32Array.of(0, 1)));
  const [a] = await r.forward({ seqs: [{ tokens: Int32Array.of(6), startPos: 7, blockTable: Int32Array.of(0, 1), numLogits: 1 }] });
  const [b] = await r.forward({ seqs: [{ tokens: Int32Array.of(6), startPos: 7, blockTable: Int32Array.of(4, 5), numLogits: 1 }] });
  expect(Array.from(b!)).toEqual(Array.from(a!));
  r.close();
  expect((await rejection(r.forward({ seqs: [] }))).message).toMatch(/closed|allocateKv/);
});

test("a bad model directory fails the load with the loader's error, from inside the worker", async () => {
  const e = await rejection(createWorkerRunner({ dir: join(GOLDEN, "no-such-model") }));
  expect(e.name).toBe("ModelLoadError");
  expect(e.message).toMatch(/config.json not found/);
});
