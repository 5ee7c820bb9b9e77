/**
 * Relays an upstream OpenAI SSE stream to the client in OpenAI's exact
 * framing, with as little work as the input allows.
 *
 * Fast path, on bytes: events are split at "\n\n" with a native byte search;
 * while every event is already canonical (`data: <one line>\n\n`) the bytes
 * are forwarded as they came (a subarray, no decode, no copy). The first event
 * that is not canonical (comments, `event:` fields, `\r\n`, `data:` without a
 * space, multi-line data) switches the rest of the stream to the general
 * parser (`sse-parser.ts`: bytes -> lines -> events), whose events are
 * re-framed. Either way `[DONE]` ends the relay (anything after it is
 * dropped) and the usage chunk just before it is read for logs and metrics.
 *
 * @example
 * const relay = createSseRelay();
 * const out = relay.push(bytes); // Uint8Array or string, possibly empty
 * if (relay.done) ...
 */
import { DONE_FRAME } from "./chunks";
import { createSseParser, type SseParser } from "./sse-parser";

export interface RelayUsage {
  promptTokens: number;
  completionTokens: number;
}

export interface SseRelay {
  /** Client-ready output for the events these bytes completed ("" when none). */
  push(bytes: Uint8Array): Uint8Array | string;
  /** End of upstream input: output for a last unterminated event. */
  end(): string;
  /** `[DONE]` was relayed. */
  readonly done: boolean;
  readonly usage: RelayUsage | null;
}

const NL = 10;
const PREFIX = [100, 97, 116, 97, 58, 32]; // "data: "
const DONE_BYTES = new TextEncoder().encode("data: [DONE]");
const EMPTY = "";

function startsWithData(b: Uint8Array, at: number): boolean {
  for (let i = 0; i < 6; i++) if (b[at + i] !== PREFIX[i]) return false;
  return true;
}

function isDone(b: Uint8Array, start: number, lineEnd: number): boolean {
  if (lineEnd - start !== DONE_BYTES.length) return false;
  for (let i = 0; i < DONE_BYTES.length; i++) if (b[start + i] !== DONE_BYTES[i]) return false;
  return true;
}

function readUsage(data: string): RelayUsage | null {
  if (!data.includes('"usage":{')) return null;
  try {
    const u = (JSON.parse(data) as { usage?: { prompt_tokens?: number; completion_tokens?: number } }).usage;
    return u ? { promptTokens: u.prompt_tokens ?? 0, completionTokens: u.completion_tokens ?? 0 } : null;
  } catch {
    return null;
  }
}

export function createSseRelay(): SseRelay {
  const decoder = new TextDecoder();
  let rest: Uint8Array | null = null; // an incomplete event (fast path)
  let slow: SseParser | null = null;
  let done = false;
  let usage: RelayUsage | null = null;
  let lastData = ""; // the event before [DONE] (slow path)
  let lastEvent: Uint8Array | null = null; // the same, fast path, when it came in an earlier read

  function reframe(events: string[]): string {
    let out = "";
    for (const data of events) {
      if (data === "[DONE]") {
        done = true;
        usage = readUsage(lastData) ?? usage;
        return out + DONE_FRAME;
      }
      lastData = data;
      out += `data: ${data}\n\n`;
    }
    return out;
  }

  function fast(b: Uint8Array): Uint8Array | string {
    let pos = 0;
    let prevStart = -1;
    let prevEnd = -1;
    for (;;) {
      const nl = b.indexOf(NL, pos);
      if (nl === -1 || nl + 1 >= b.length) break; // need "\n\n" complete
      if (b[nl + 1] !== NL || !startsWithData(b, pos)) {
        // Not canonical: the general parser takes over from this event on.
        slow = createSseParser();
        const head = pos > 0 ? b.subarray(0, pos) : EMPTY;
        const tail = reframe(slow.push(b.subarray(pos)));
        if (head === EMPTY) return tail;
        return tail === "" ? head : decoder.decode(head) + tail;
      }
      if (isDone(b, pos, nl)) {
        done = true;
        const prev = prevStart >= 0 ? b.subarray(prevStart + 6, prevEnd) : lastEvent;
        if (prev) usage = readUsage(decoder.decode(prev)) ?? usage;
        return b.subarray(0, nl + 2);
      }
      prevStart = pos;
      prevEnd = nl;
      pos = nl + 2;
    }
    if (prevStart >= 0) lastEvent = b.subarray(prevStart + 6, prevEnd);
    if (pos < b.length) rest = b.slice(pos);
    return pos === 0 ? EMPTY : b.subarray(0, pos);
  }

  return {
    push(bytes) {
      if (done) return EMPTY;
      if (slow) return reframe(slow.push(bytes));
      let b = bytes;
      if (rest) {
        b = new Uint8Array(rest.length + bytes.length);
        b.set(rest);
        b.set(bytes, rest.length);
        rest = null;
      }
      return fast(b);
    },
    end() {
      if (done) return EMPTY;
      if (rest && !slow) {
        slow = createSseParser();
        slow.push(rest);
        rest = null;
      }
      return slow ? reframe(slow.end()) : EMPTY;
    },
    get done() {
      return done;
    },
    get usage() {
      return usage;
    },
  };
}
