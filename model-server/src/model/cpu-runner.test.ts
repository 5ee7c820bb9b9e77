import { expect, test } from "bun:test";
import { join } from "node:path";
import { createCpuRunner } from "./cpu-runner";

const DIR = join(import.meta.dir, "..", "..", "fixtures", "golden", "qwen2_moe");
const prompt = Int32Array.from([5, 17, 200, 3, 99, 42, 7, 7, 250, 1]);

test("KV exported from some blocks and imported into others continues identically", async () => {
  const r = await createCpuRunner({ dir: DIR });
  r.allocateKv(8, 4);
  const a = Int32Array.from([0, 1, 2]);
  const b = Int32Array.from([6, 4, 5]);
  await r.forward({ seqs: [{ tokens: prompt, startPos: 0, blockTable: a, numLogits: 1 }] });
  const kv = r.exportKv(a);
  expect(kv.numBlocks).toBe(3);
  expect(kv.data.byteLength).toBe(3 * r.kvBytesPerBlock(4));
  r.importKv(b, kv);
  const [la] = await r.forward({ seqs: [{ tokens: Int32Array.of(9), startPos: prompt.length, blockTable: a, numLogits: 1 }] });
  const [lb] = await r.forward({ seqs: [{ tokens: Int32Array.of(9), startPos: prompt.length, blockTable: b, numLogits: 1 }] });
  expect(Array.from(lb!)).toEqual(Array.from(la!));
  expect(() => r.importKv(Int32Array.of(7), kv)).toThrow(/expected 1 f32 blocks/);
  r.close();
});

test("a verify step returns k+1 rows equal to decoding them one by one", async () => {
  const r = await createCpuRunner({ dir: DIR });
  r.allocateKv(8, 4);
  const t = Int32Array.from([0, 1, 2, 3]);
  await r.forward({ seqs: [{ tokens: prompt, startPos: 0, blockTable: t, numLogits: 0 }] });
  const extra = Int32Array.from([11, 12, 13]);
  const [verify] = await r.forward({ seqs: [{ tokens: extra, startPos: prompt.length, blockTable: t, numLogits: 3 }] });
  expect(verify!.length).toBe(3 * r.spec.vocabSize);
  for (let i = 0; i < 3; i++) {
    const [one] = await r.forward({ seqs: [{ tokens: Int32Array.of(extra[i]!), startPos: prompt.length + i, blockTable: t, numLogits: 1 }] });
    const row = verify!.subarray(i * r.spec.vocabSize, (i + 1) * r.spec.vocabSize);
    let d = 0;
    for (let j = 0; j < row.length; j++) d = Math.max(d, Math.abs(row[j]! - one![j]!));
    expect(d).toBeLessThan(1e-5);
  }
  r.close();
});

test("bad steps are refused with a clear error and leave the runner usable", async () => {
  const r = await createCpuRunner({ dir: DIR });
  expect(() => r.forwardSync({ seqs: [] })).toThrow(/allocateKv\(\) must be called/);
  r.allocateKv(4, 4);
  const t = Int32Array.from([0, 1]);
  expect(() => r.forwardSync({ seqs: [{ tokens: prompt, startPos: 0, blockTable: Int32Array.of(0), numLogits: 1 }] })).toThrow(/cannot hold 10 positions/);
  expect(() => r.forwardSync({ seqs: [{ tokens: Int32Array.of(1, 2), startPos: 0, blockTable: Int32Array.of(9), numLogits: 1 }] })).toThrow(/block id 9 outside/);
  expect(() => r.forwardSync({ seqs: [{ tokens: Int32Array.of(1, 9999), startPos: 0, blockTable: t, numLogits: 1 }] })).toThrow(/token id 9999 outside/);
  expect(() => r.forwardSync({ seqs: [{ tokens: Int32Array.of(1), startPos: 200, blockTable: new Int32Array(60), numLogits: 1 }] })).toThrow(/past the model's context of 128/);
  const [ok] = r.forwardSync({ seqs: [{ tokens: Int32Array.of(1, 2), startPos: 0, blockTable: t, numLogits: 1 }] });
  expect(ok!.length).toBe(r.spec.vocabSize);
  expect(r.spec.architecture).toBe("qwen2_moe");
  r.close();
  expect(() => r.forwardSync({ seqs: [] })).toThrow(/closed/);
});

test("long context: one 300-token prefill equals the same prompt in 64-token chunks (bundled model)", async () => {
  const r = await createCpuRunner({ dir: join(import.meta.dir, "..", "..", "models", "tiny-wordnet-moe") });
  const B = 16;
  const n = 300;
  const tokens = Int32Array.from({ length: n }, (_, i) => (i * 131 + 7) % 4093);
  const blocks = Math.ceil(n / B);
  r.allocateKv(2 * blocks, B);
  const a = Int32Array.from({ length: blocks }, (_, i) => i);
  const b = Int32Array.from({ length: blocks }, (_, i) => 2 * blocks - 1 - i);
  const [whole] = r.forwardSync({ seqs: [{ tokens, startPos: 0, blockTable: a, numLogits: 1 }] });
  let last: Float32Array | undefined;
  for (let s = 0; s < n; s += 64) {
    const chunk = tokens.subarray(s, Math.min(n, s + 64));
    [last] = r.forwardSync({ seqs: [{ tokens: chunk, startPos: s, blockTable: b, numLogits: s + 64 >= n ? 1 : 0 }] });
  }
  let d = 0;
  for (let j = 0; j < whole!.length; j++) d = Math.max(d, Math.abs(whole![j]! - last![j]!));
  expect(d).toBeLessThan(1e-4);
  r.close();
});
