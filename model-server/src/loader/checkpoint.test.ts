import { expect, test } from "bun:test";
import { copyFileSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCpuRunner } from "../model/cpu-runner";
import { openCheckpoint } from "./checkpoint";
import { readSafetensorsHeader, readTensorF32, encodeSafetensors } from "./safetensors";

const GOLDEN = join(import.meta.dir, "..", "..", "fixtures", "golden");

function copyWithout(src: string, drop: (name: string) => boolean, change?: (name: string, shape: number[], data: Float32Array) => { shape: number[]; data: Float32Array }): string {
  const dir = mkdtempSync(join(tmpdir(), "dispatch-ckpt-"));
  copyFileSync(join(src, "config.json"), join(dir, "config.json"));
  const h = readSafetensorsHeader(join(src, "model.safetensors"));
  const out: Record<string, { shape: number[]; data: Float32Array }> = {};
  for (const [name, e] of Object.entries(h.tensors)) {
    if (drop(name)) continue;
    const data = readTensorF32(e);
    out[name] = change ? change(name, e.shape, data) : { shape: e.shape, data };
  }
  writeFileSync(join(dir, "model.safetensors"), encodeSafetensors(out));
  return dir;
}

test("sharded checkpoints load through the index (olmoe fixture has 5 shards)", () => {
  const ckpt = openCheckpoint(join(GOLDEN, "olmoe"));
  expect(ckpt.files.length).toBe(5);
  expect(ckpt.has("model.layers.1.mlp.experts.7.down_proj.weight")).toBe(true);
  expect(ckpt.load("model.norm.weight", [32]).length).toBe(32);
});

test("a missing tensor fails the load with its name", async () => {
  const dir = copyWithout(join(GOLDEN, "qwen3_moe"), (n) => n === "model.layers.1.mlp.experts.5.up_proj.weight");
  await expect(createCpuRunner({ dir })).rejects.toThrow("missing tensor model.layers.1.mlp.experts.5.up_proj.weight");
  rmSync(dir, { recursive: true });
});

test("a tensor of the wrong shape fails the load with its name and both shapes", async () => {
  const dir = copyWithout(join(GOLDEN, "mixtral"), () => false, (name, shape, data) =>
    name === "model.layers.0.self_attn.k_proj.weight" ? { shape: [shape[1]!, shape[0]!], data } : { shape, data },
  );
  await expect(createCpuRunner({ dir })).rejects.toThrow("tensor model.layers.0.self_attn.k_proj.weight has shape [32,16], expected [16,32]");
  rmSync(dir, { recursive: true });
});

test("a shard named by the index but absent is reported", () => {
  const dir = mkdtempSync(join(tmpdir(), "dispatch-ckpt-"));
  cpSync(join(GOLDEN, "olmoe"), dir, { recursive: true });
  rmSync(join(dir, "model-00003-of-00005.safetensors"));
  expect(() => openCheckpoint(dir)).toThrow(/shard model-00003-of-00005.safetensors listed in .* is missing/);
  rmSync(dir, { recursive: true });
});

test("a bf16 checkpoint loads and computes with the rounded weights", async () => {
  const dir = copyWithout(join(GOLDEN, "qwen3_moe"), () => false);
  // Rewrite as BF16 and compare with an F32 copy holding the same rounded values.
  const h = readSafetensorsHeader(join(dir, "model.safetensors"));
  const bf: Record<string, { shape: number[]; data: Float32Array; dtype: "BF16" }> = {};
  const f32: Record<string, { shape: number[]; data: Float32Array }> = {};
  for (const [name, e] of Object.entries(h.tensors)) {
    const d = readTensorF32(e);
    const bits = new Uint32Array(d.buffer, d.byteOffset, d.length);
    const rounded = new Float32Array(d.length);
    new Uint32Array(rounded.buffer).set(bits.map((b) => b & 0xffff0000));
    bf[name] = { shape: e.shape, data: d, dtype: "BF16" };
    f32[name] = { shape: e.shape, data: rounded };
  }
  writeFileSync(join(dir, "model.safetensors"), encodeSafetensors(bf));
  const dir2 = mkdtempSync(join(tmpdir(), "dispatch-ckpt-"));
  writeFileSync(join(dir2, "config.json"), readFileSync(join(dir, "config.json")));
  writeFileSync(join(dir2, "model.safetensors"), encodeSafetensors(f32));
  const a = await createCpuRunner({ dir });
  const b = await createCpuRunner({ dir: dir2 });
  const step = { seqs: [{ tokens: Int32Array.from([1, 2, 3, 4, 5]), startPos: 0, blockTable: Int32Array.from([0, 1]), numLogits: 5 }] };
  a.allocateKv(2, 4);
  b.allocateKv(2, 4);
  expect(Array.from(a.forwardSync(step)[0]!)).toEqual(Array.from(b.forwardSync(step)[0]!));
  rmSync(dir, { recursive: true });
  rmSync(dir2, { recursive: true });
});
