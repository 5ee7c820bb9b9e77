import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ModelLoadError } from "./errors";
import { encodeSafetensors, halfToFloat, readSafetensorsHeader, readTensorF32 } from "./safetensors";

const dir = mkdtempSync(join(tmpdir(), "dispatch-st-"));

test("halfToFloat covers normals, subnormals, zero, inf and NaN", () => {
  expect(halfToFloat(0x3c00)).toBe(1);
  expect(halfToFloat(0xc000)).toBe(-2);
  expect(halfToFloat(0x3555)).toBeCloseTo(0.333251953125, 12);
  expect(halfToFloat(0x0001)).toBe(2 ** -24);
  expect(halfToFloat(0x0000)).toBe(0);
  expect(halfToFloat(0x7c00)).toBe(Infinity);
  expect(halfToFloat(0xfc00)).toBe(-Infinity);
  expect(Number.isNaN(halfToFloat(0x7e00))).toBe(true);
});

test("F32 and BF16 tensors round-trip; BF16 keeps the top 16 bits", () => {
  const a = Float32Array.from([1, -2.5, 3.1415927, 1e-3]);
  const file = join(dir, "rt.safetensors");
  writeFileSync(file, encodeSafetensors({ a: { shape: [2, 2], data: a }, b: { shape: [4], data: a, dtype: "BF16" } }));
  const h = readSafetensorsHeader(file);
  expect(h.tensors.a!.shape).toEqual([2, 2]);
  expect(Array.from(readTensorF32(h.tensors.a!))).toEqual(Array.from(a));
  const b = readTensorF32(h.tensors.b!);
  const bits = new Uint32Array(a.buffer);
  const want = Float32Array.from(bits, (x) => new Float32Array(Uint32Array.of(x & 0xffff0000).buffer)[0]!);
  expect(Array.from(b)).toEqual(Array.from(want));
});

test("F16 tensors are converted", () => {
  // Build the file by hand: header + two halfs (1.0, -0.5).
  const header = JSON.stringify({ h: { dtype: "F16", shape: [2], data_offsets: [0, 4] } });
  const buf = new Uint8Array(8 + header.length + 4);
  new DataView(buf.buffer).setBigUint64(0, BigInt(header.length), true);
  buf.set(new TextEncoder().encode(header), 8);
  new DataView(buf.buffer).setUint16(8 + header.length, 0x3c00, true);
  new DataView(buf.buffer).setUint16(8 + header.length + 2, 0xb800, true);
  const file = join(dir, "f16.safetensors");
  writeFileSync(file, buf);
  expect(Array.from(readTensorF32(readSafetensorsHeader(file).tensors.h!))).toEqual([1, -0.5]);
});

test("a truncated file, an unsupported dtype and a missing file are clear ModelLoadErrors", () => {
  const file = join(dir, "trunc.safetensors");
  const good = encodeSafetensors({ a: { shape: [4], data: new Float32Array(4) } });
  writeFileSync(file, good.subarray(0, good.length - 8));
  expect(() => readSafetensorsHeader(file)).toThrow(/tensor a lies outside the file/);
  const header = JSON.stringify({ i: { dtype: "I64", shape: [1], data_offsets: [0, 8] } });
  const buf = new Uint8Array(8 + header.length + 8);
  new DataView(buf.buffer).setBigUint64(0, BigInt(header.length), true);
  buf.set(new TextEncoder().encode(header), 8);
  writeFileSync(join(dir, "i64.safetensors"), buf);
  expect(() => readTensorF32(readSafetensorsHeader(join(dir, "i64.safetensors")).tensors.i!)).toThrow(/dtype I64; supported: F32, F16, BF16/);
  try {
    readSafetensorsHeader(join(dir, "nope.safetensors"));
    throw new Error("no error");
  } catch (e) {
    expect(e).toBeInstanceOf(ModelLoadError);
    expect((e as ModelLoadError).code).toBe("missing_file");
  }
});
