/**
 * Connect's streaming envelopes (flags byte, 4-byte big-endian length, payload), shared by the two
 * Generate clients: connect-stream.ts (fetch) and socket-stream.ts (our HTTP/1.1 sockets).
 */
import { Code, ConnectError } from "@connectrpc/connect";

export const FLAG_COMPRESSED = 0b01;
export const FLAG_END_STREAM = 0b10;

/** `message` in one envelope, placed after `prefix` (a request head) when one is given. */
export function envelope(message: Uint8Array, prefix?: Uint8Array): Uint8Array {
  const at = prefix ? prefix.length : 0;
  const out = new Uint8Array(at + 5 + message.length);
  if (prefix) out.set(prefix);
  new DataView(out.buffer).setUint32(at + 1, message.length);
  out.set(message, at + 5);
  return out;
}

/** The payload length of the envelope starting at buf[off], or -1 while its bytes are not all in `buf`. */
export function envelopeLength(buf: Uint8Array, off: number): number {
  if (buf.length - off < 5) return -1;
  const len = ((buf[off + 1]! << 24) | (buf[off + 2]! << 16) | (buf[off + 3]! << 8) | buf[off + 4]!) >>> 0;
  return buf.length - off - 5 < len ? -1 : len;
}

/** `a` then `b` in one array (`b` itself when `a` is empty). */
export function joinBytes(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

export const compressedMessageError = () => new ConnectError("The server sent a compressed message; none was asked for.", Code.Internal);
export const missingEndError = () => new ConnectError("The stream ended without its end-of-stream message.", Code.Unavailable);
