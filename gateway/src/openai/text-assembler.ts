/**
 * Token ids in, client-visible text out: UTF-8-safe detokenization followed
 * by stop-string matching. Pure; one per generated sequence.
 *
 * @example
 * const a = createTextAssembler(detok, createStopMatcher(["\n\n"]));
 * const { text, stopped } = a.push([42, 43]);
 */
import type { StopMatcher } from "./stop-matcher";
import type { Utf8Detokenizer } from "./utf8-detokenizer";

export interface TextAssembler {
  /** `stop`: the stop string that was hit. */
  push(tokenIds: ArrayLike<number>): { text: string; stopped: boolean; stop?: string };
  /** Remaining text at the end of generation (held-back stop prefix, trailing bytes). */
  finish(): string;
}

export function createTextAssembler(detok: Utf8Detokenizer, stop: StopMatcher): TextAssembler {
  return {
    push(tokenIds) {
      const text = detok.push(tokenIds);
      return text === "" ? { text, stopped: false } : stop.push(text);
    },
    finish() {
      const tail = detok.flush();
      const r = tail === "" ? { text: "", stopped: false } : stop.push(tail);
      return r.stopped ? r.text : r.text + stop.flush();
    },
  };
}
