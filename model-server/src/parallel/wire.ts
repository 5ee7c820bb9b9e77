/**
 * One message between two ranks: an int section and a float section, so both
 * dispatch modes can move routing metadata and fp32 rows in one transfer.
 * Layout: [nInts i32][nFloats i32][ints ...][floats ...], 4-byte aligned.
 *
 * @example
 *   const bytes = encodeMessage(Int32Array.of(2, 5), Float32Array.of(0.5));
 *   decodeMessage(bytes).ints;   // Int32Array [2, 5]
 */
import { EpError } from "./errors";

export interface Message {
  ints: Int32Array;
  floats: Float32Array;
}

export function encodeMessage(ints: Int32Array, floats: Float32Array): Uint8Array {
  const buf = new ArrayBuffer(8 + 4 * ints.length + 4 * floats.length);
  const head = new Int32Array(buf, 0, 2);
  head[0] = ints.length;
  head[1] = floats.length;
  new Int32Array(buf, 8, ints.length).set(ints);
  new Float32Array(buf, 8 + 4 * ints.length, floats.length).set(floats);
  return new Uint8Array(buf);
}

export function decodeMessage(bytes: Uint8Array): Message {
  if (bytes.byteLength === 0) return { ints: new Int32Array(0), floats: new Float32Array(0) };
  // Copy when the view is not 4-byte aligned (a transport may hand back any slice).
  const b = bytes.byteOffset % 4 === 0 ? bytes : bytes.slice();
  if (b.byteLength < 8) throw new EpError("transport", `message of ${b.byteLength} bytes has no header`);
  const head = new Int32Array(b.buffer, b.byteOffset, 2);
  const ni = head[0]!;
  const nf = head[1]!;
  if (ni < 0 || nf < 0 || 8 + 4 * (ni + nf) !== b.byteLength) throw new EpError("transport", `message header (${ni} ints, ${nf} floats) does not match its ${b.byteLength} bytes`);
  return { ints: new Int32Array(b.buffer, b.byteOffset + 8, ni), floats: new Float32Array(b.buffer, b.byteOffset + 8 + 4 * ni, nf) };
}
