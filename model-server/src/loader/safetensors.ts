/**
 * safetensors files, read tensor by tensor (never the whole file at once):
 * an 8-byte little-endian header length, a JSON header naming each tensor's
 * dtype, shape and byte range, then the raw data. F32, F16 and BF16 are
 * converted to fp32 on read.
 *
 * @example
 *   const header = readSafetensorsHeader("model.safetensors");
 *   const w = readTensorF32(header.tensors["lm_head.weight"]!);
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { ModelLoadError } from "./errors";

export type SafetensorsDType = "F32" | "F16" | "BF16";

export interface TensorEntry {
  name: string;
  dtype: string;
  shape: number[];
  file: string;
  /** Absolute byte range in the file. */
  begin: number;
  end: number;
}

export interface SafetensorsHeader {
  file: string;
  tensors: Record<string, TensorEntry>;
  metadata: Record<string, string>;
}

const BYTES: Record<string, number> = { F32: 4, F16: 2, BF16: 2 };

/** Parses the header of one file; checks every byte range lies inside the file. */
export function readSafetensorsHeader(file: string): SafetensorsHeader {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch {
    throw new ModelLoadError("missing_file", `cannot open ${file}`);
  }
  try {
    const size = fstatSync(fd).size;
    const lenBuf = Buffer.alloc(8);
    if (readSync(fd, lenBuf, 0, 8, 0) !== 8) throw new ModelLoadError("bad_file", `${file}: too short for a safetensors header`);
    const headerLen = Number(lenBuf.readBigUInt64LE(0));
    if (headerLen <= 0 || 8 + headerLen > size) throw new ModelLoadError("bad_file", `${file}: header length ${headerLen} does not fit a ${size}-byte file`);
    const headerBuf = Buffer.alloc(headerLen);
    readSync(fd, headerBuf, 0, headerLen, 8);
    let json: Record<string, unknown>;
    try {
      json = JSON.parse(headerBuf.toString("utf8"));
    } catch {
      throw new ModelLoadError("bad_file", `${file}: header is not JSON`);
    }
    const base = 8 + headerLen;
    const tensors: Record<string, TensorEntry> = {};
    let metadata: Record<string, string> = {};
    for (const [name, raw] of Object.entries(json)) {
      if (name === "__metadata__") {
        metadata = (raw ?? {}) as Record<string, string>;
        continue;
      }
      const t = raw as { dtype: string; shape: number[]; data_offsets: [number, number] };
      const begin = base + t.data_offsets[0];
      const end = base + t.data_offsets[1];
      if (end > size || begin > end) throw new ModelLoadError("bad_file", `${file}: tensor ${name} lies outside the file`);
      tensors[name] = { name, dtype: t.dtype, shape: t.shape, file, begin, end };
    }
    return { file, tensors, metadata };
  } finally {
    closeSync(fd);
  }
}

/** Reads one tensor and converts it to fp32. */
export function readTensorF32(t: TensorEntry): Float32Array {
  const width = BYTES[t.dtype];
  if (width === undefined) throw new ModelLoadError("unsupported_dtype", `tensor ${t.name} in ${t.file} has dtype ${t.dtype}; supported: F32, F16, BF16`);
  const count = t.shape.reduce((a, b) => a * b, 1);
  if (count * width !== t.end - t.begin) throw new ModelLoadError("bad_file", `tensor ${t.name} in ${t.file}: ${t.end - t.begin} bytes for shape [${t.shape}] ${t.dtype}`);
  const bytes = new Uint8Array(t.end - t.begin);
  const fd = openSync(t.file, "r");
  try {
    let done = 0;
    while (done < bytes.length) {
      const n = readSync(fd, bytes, done, bytes.length - done, t.begin + done);
      if (n <= 0) throw new ModelLoadError("bad_file", `${t.file}: short read in tensor ${t.name}`);
      done += n;
    }
  } finally {
    closeSync(fd);
  }
  return toF32(bytes, t.dtype as SafetensorsDType, count);
}

function toF32(bytes: Uint8Array, dtype: SafetensorsDType, count: number): Float32Array {
  if (dtype === "F32") return new Float32Array(bytes.buffer, bytes.byteOffset, count);
  const src = new Uint16Array(bytes.buffer, bytes.byteOffset, count);
  const out = new Float32Array(count);
  if (dtype === "BF16") {
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < count; i++) bits[i] = src[i]! << 16;
    return out;
  }
  for (let i = 0; i < count; i++) out[i] = halfToFloat(src[i]!);
  return out;
}

/** IEEE 754 binary16 -> number (subnormals, inf and NaN included). */
export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/**
 * Writes a safetensors file (tests, and tools that re-layout a checkpoint).
 * Tensors are written in the given dtype; F16 is not offered (no use here).
 */
export function encodeSafetensors(tensors: Record<string, { shape: number[]; data: Float32Array; dtype?: "F32" | "BF16" }>): Uint8Array {
  const header: Record<string, unknown> = { __metadata__: { format: "pt" } };
  let offset = 0;
  const parts: Uint8Array[] = [];
  for (const [name, t] of Object.entries(tensors)) {
    const dtype = t.dtype ?? "F32";
    let bytes: Uint8Array;
    if (dtype === "F32") bytes = new Uint8Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength));
    else {
      const bits = new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.length);
      const out = new Uint16Array(t.data.length);
      for (let i = 0; i < out.length; i++) out[i] = bits[i]! >>> 16; // truncation: exact for values already bf16
      bytes = new Uint8Array(out.buffer);
    }
    header[name] = { dtype, shape: t.shape, data_offsets: [offset, offset + bytes.length] };
    offset += bytes.length;
    parts.push(bytes);
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8 !== 0) json += " ";
  const headerBytes = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + headerBytes.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  let at = 8 + headerBytes.length;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
