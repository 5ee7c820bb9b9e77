/**
 * GenerateRequest to protobuf bytes by hand, for the fetch path: the same bytes as
 * `toBinary(GenerateRequestSchema, create(...))` (fields in number order, proto3 defaults
 * left out, `sampling` and `stop` always present, repeated uint32 packed), checked against it
 * in generate-request.test.ts. protobuf-es spends ~35 µs on a 512-token prompt (half of it
 * copying the Uint32Array into a plain array for `create`); this writes the ids straight from
 * the Uint32Array in ~2 µs, before the call goes out, so it is time-to-first-token.
 * Returns null for a value it does not take (a negative or non-integer where an unsigned
 * integer belongs, a deadline past 2^53): the caller then uses protobuf-es, which encodes or
 * rejects it as before. `DISPATCH_PROTO_FAST=0` turns it off.
 *
 * @example
 * const bytes = encodeGenerateRequest(params) ?? toBinary(GenerateRequestSchema, toMessage(params));
 */
import type { GenerateParams } from "./model-client";

export const fastEncodeOn = process.env.DISPATCH_PROTO_FAST !== "0";

const utf8 = new TextEncoder();
const f32 = new DataView(new ArrayBuffer(4));

// Floats: -0 is written (protobuf-es tells it from 0 with Object.is); integers: 0 and -0 are not.
const isU32 = (v: number) => Number.isInteger(v) && v >= 0 && v <= 0xffff_ffff;

/** Bytes of a varint for a non-negative integer up to 2^53. */
function varintLen(v: number): number {
  let n = 1;
  while (v >= 128) {
    v = Math.floor(v / 128);
    n++;
  }
  return n;
}

class Writer {
  buf: Uint8Array;
  pos = 0;
  constructor(size: number) {
    this.buf = new Uint8Array(size);
  }
  varint(v: number): void {
    const b = this.buf;
    while (v >= 128) {
      b[this.pos++] = (v % 128) | 128;
      v = Math.floor(v / 128);
    }
    b[this.pos++] = v;
  }
  u32(v: number): void {
    const b = this.buf;
    while (v > 127) {
      b[this.pos++] = (v & 127) | 128;
      v >>>= 7;
    }
    b[this.pos++] = v;
  }
  float(v: number): void {
    f32.setFloat32(0, v, true);
    this.buf[this.pos++] = f32.getUint8(0);
    this.buf[this.pos++] = f32.getUint8(1);
    this.buf[this.pos++] = f32.getUint8(2);
    this.buf[this.pos++] = f32.getUint8(3);
  }
  bytes(b: Uint8Array): void {
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }
}

/** Packed bytes of uint32 values (their varints, no tag or length). */
function packedLen(ids: ArrayLike<number>): number {
  let n = 0;
  for (let i = 0; i < ids.length; i++) {
    const v = ids[i]!;
    n += v < 128 ? 1 : v < 16384 ? 2 : v < 2097152 ? 3 : v < 268435456 ? 4 : 5;
  }
  return n;
}

export function encodeGenerateRequest(p: GenerateParams): Uint8Array | null {
  const temperature = p.temperature ?? 1;
  const topP = p.topP ?? 0;
  const topK = p.topK !== undefined && p.topK > 0 ? p.topK : 0;
  const fp = p.frequencyPenalty ?? 0;
  const pp = p.presencePenalty ?? 0;
  const maxTokens = p.maxTokens ?? 0;
  const minTokens = p.minTokens ?? 0;
  const deadline = p.deadlineUnixMs ?? 0;
  const seed = p.seed;
  const top = p.topLogprobs ?? 0;
  const stops = p.stopTokenIds;
  if (p.logitBias !== undefined || p.jsonObject || p.jsonSchema !== undefined || p.jsonPrefix || p.jsonThinking || p.priority) return null; // protobuf-es writes these (rare: not the hot path)
  if (!isU32(topK) || !isU32(maxTokens) || !isU32(minTokens) || !isU32(top)) return null;
  if (!Number.isSafeInteger(deadline) || deadline < 0) return null;
  if (seed !== undefined && (!Number.isSafeInteger(seed) || seed < 0)) return null;
  for (let i = 0; i < stops.length; i++) if (!isU32(stops[i]!)) return null;
  // NaN or an infinity encodes fine as a float; protobuf-es would write it too.

  const rid = p.requestId ? utf8.encode(p.requestId) : null;
  const model = p.model ? utf8.encode(p.model) : null;
  const ids = p.promptTokenIds; // Uint32Array: every value a uint32
  const idsLen = ids.length > 0 ? packedLen(ids) : 0;

  // SamplingParams (field 4): floats are fixed32 (tag + 4), ints varints.
  let sLen = 0;
  if (!Object.is(temperature, 0)) sLen += 5;
  if (!Object.is(topP, 0)) sLen += 5;
  if (topK !== 0) sLen += 1 + varintLen(topK);
  if (seed !== undefined) sLen += 1 + varintLen(seed);
  if (!Object.is(fp, 0)) sLen += 5;
  if (!Object.is(pp, 0)) sLen += 5;
  // StopConditions (field 5).
  const stopsLen = stops.length > 0 ? packedLen(stops) : 0;
  let tLen = 0;
  if (maxTokens !== 0) tLen += 1 + varintLen(maxTokens);
  if (stops.length > 0) tLen += 1 + varintLen(stopsLen) + stopsLen;
  if (p.ignoreEos) tLen += 2;
  if (minTokens !== 0) tLen += 1 + varintLen(minTokens);

  let size = 0;
  if (rid) size += 1 + varintLen(rid.length) + rid.length;
  if (model) size += 1 + varintLen(model.length) + model.length;
  if (ids.length > 0) size += 1 + varintLen(idsLen) + idsLen;
  size += 1 + varintLen(sLen) + sLen;
  size += 1 + varintLen(tLen) + tLen;
  if (deadline !== 0) size += 1 + varintLen(deadline);
  if (top !== 0) size += 1 + varintLen(top);

  const w = new Writer(size);
  if (rid) {
    w.buf[w.pos++] = (1 << 3) | 2;
    w.varint(rid.length);
    w.bytes(rid);
  }
  if (model) {
    w.buf[w.pos++] = (2 << 3) | 2;
    w.varint(model.length);
    w.bytes(model);
  }
  if (ids.length > 0) {
    w.buf[w.pos++] = (3 << 3) | 2;
    w.varint(idsLen);
    for (let i = 0; i < ids.length; i++) w.u32(ids[i]!);
  }
  w.buf[w.pos++] = (4 << 3) | 2;
  w.varint(sLen);
  if (!Object.is(temperature, 0)) {
    w.buf[w.pos++] = (1 << 3) | 5;
    w.float(temperature);
  }
  if (!Object.is(topP, 0)) {
    w.buf[w.pos++] = (2 << 3) | 5;
    w.float(topP);
  }
  if (topK !== 0) {
    w.buf[w.pos++] = 3 << 3;
    w.varint(topK);
  }
  if (seed !== undefined) {
    w.buf[w.pos++] = 4 << 3;
    w.varint(seed);
  }
  if (!Object.is(fp, 0)) {
    w.buf[w.pos++] = (5 << 3) | 5;
    w.float(fp);
  }
  if (!Object.is(pp, 0)) {
    w.buf[w.pos++] = (6 << 3) | 5;
    w.float(pp);
  }
  w.buf[w.pos++] = (5 << 3) | 2;
  w.varint(tLen);
  if (maxTokens !== 0) {
    w.buf[w.pos++] = 1 << 3;
    w.varint(maxTokens);
  }
  if (stops.length > 0) {
    w.buf[w.pos++] = (2 << 3) | 2;
    w.varint(stopsLen);
    for (let i = 0; i < stops.length; i++) w.u32(stops[i]!);
  }
  if (p.ignoreEos) {
    w.buf[w.pos++] = 3 << 3;
    w.buf[w.pos++] = 1;
  }
  if (minTokens !== 0) {
    w.buf[w.pos++] = 4 << 3;
    w.varint(minTokens);
  }
  if (deadline !== 0) {
    w.buf[w.pos++] = 6 << 3;
    w.varint(deadline);
  }
  if (top !== 0) {
    w.buf[w.pos++] = 8 << 3;
    w.varint(top);
  }
  if (w.pos !== size) throw new Error(`encodeGenerateRequest: wrote ${w.pos} of ${size} bytes`);
  return w.buf;
}
