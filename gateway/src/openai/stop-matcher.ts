/**
 * Finds stop strings in streamed text, including ones that span chunks.
 *
 * Text that could still turn into a stop string (a suffix of what was seen
 * that is a prefix of some stop string) is held back until the next chunk
 * decides it; everything before it is released at once. The stop string
 * itself and anything after it are never emitted (OpenAI semantics).
 *
 * @example
 * const m = createStopMatcher(["</s>"]);
 * m.push("hello </");  // { text: "hello ", stopped: false }
 * m.push("s> more");   // { text: "", stopped: true }
 */
export interface StopMatcher {
  /** Feed text; returns what may be emitted now and whether a stop string was hit (`stop`: which). */
  push(text: string): { text: string; stopped: boolean; stop?: string };
  /** End of stream: release what was held back. */
  flush(): string;
}

const NONE: StopMatcher = {
  push: (text) => ({ text, stopped: false }),
  flush: () => "",
};

export function createStopMatcher(stops: readonly string[]): StopMatcher {
  if (stops.length === 0) return NONE;
  const maxHold = Math.max(...stops.map((s) => s.length)) - 1;
  let held = "";
  let done = false;
  return {
    push(text) {
      if (done) return { text: "", stopped: true };
      const buf = held + text;
      let cut = -1;
      let hit = "";
      for (const s of stops) {
        const i = buf.indexOf(s);
        if (i !== -1 && (cut === -1 || i < cut)) (cut = i), (hit = s);
      }
      if (cut !== -1) {
        done = true;
        held = "";
        return { text: buf.slice(0, cut), stopped: true, stop: hit };
      }
      // Longest suffix of buf that is a proper prefix of a stop string.
      let hold = 0;
      for (let k = Math.min(maxHold, buf.length); k > 0 && hold === 0; k--) {
        const tail = buf.slice(buf.length - k);
        for (const s of stops) {
          if (s.length > k && s.startsWith(tail)) {
            hold = k;
            break;
          }
        }
      }
      held = hold ? buf.slice(buf.length - hold) : "";
      return { text: hold ? buf.slice(0, buf.length - hold) : buf, stopped: false };
    },
    flush() {
      const out = done ? "" : held;
      held = "";
      return out;
    },
  };
}
