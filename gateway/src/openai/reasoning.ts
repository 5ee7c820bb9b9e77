/**
 * Splits a reasoning model's thinking from its answer: Qwen3, QwQ and DeepSeek-R1 write `<think>...</think>` before
 * the answer, and their templates say so. The thinking goes to `reasoning_content` (the field DeepSeek's API and
 * vLLM's reasoning parsers use), the rest stays content. Only a block at the very start counts (after whitespace);
 * `startInside` when the prompt already opened it (templates that end the generation prompt with `<think>\n`).
 * Text that could still be a marker is held back until it cannot; an unfinished block (the length ran out) is all
 * reasoning; whitespace around the thinking is dropped. Pure.
 *
 * @example
 * const s = createReasoningSplitter(false);
 * s.push("<think>\nThe user greets"); // { reasoning: "The user greets", content: "" }
 * s.push(".\n</think>\n\nHello!");    // { reasoning: ".", content: "Hello!" }
 */
import { heldSuffix } from "./held-suffix";

export interface ReasoningSplitter {
  push(text: string): { reasoning: string; content: string };
  /** The end of the generation: whatever was held back. */
  finish(): { reasoning: string; content: string };
  /** Where the text stands: before any block ("start": undecided), inside one, or after (the answer). */
  readonly phase: "start" | "inside" | "after";
  /** A thinking block was opened (by the text or the prompt). */
  readonly opened: boolean;
}

const OPEN = "<think>";
const CLOSE = "</think>";

/** Whether a chat template announces `<think>` blocks. */
export function templateHasReasoning(template: string): boolean {
  return template.includes(OPEN) && template.includes(CLOSE);
}

/** Whether a rendered prompt leaves a `<think>` block open for the model (the generation starts inside it). */
export function promptOpensReasoning(prompt: string): boolean {
  return /<think>\s*$/.test(prompt);
}

export function createReasoningSplitter(startInside: boolean): ReasoningSplitter {
  let state: "start" | "inside" | "after" = startInside ? "inside" : "start";
  let opened = startInside;
  let buf = "";
  let began = false; // inside: some reasoning text was shown (leading whitespace is dropped before it)
  let blank = ""; // inside: trailing whitespace, shown only if more reasoning follows
  let lead = true; // after: leading whitespace of the answer is dropped
  const reason = (t: string): string => {
    if (!began) {
      t = t.trimStart();
      if (t === "") return "";
      began = true;
    }
    const body = t.trimEnd();
    const out = body === "" ? "" : blank + body;
    blank = body === "" ? blank + t : t.slice(body.length);
    return out;
  };
  const answer = (t: string): string => {
    if (!lead) return t;
    t = t.trimStart();
    if (t !== "") lead = false;
    return t;
  };
  return {
    push(text) {
      buf += text;
      let reasoning = "";
      let content = "";
      for (;;) {
        if (state === "start") {
          const s = buf.trimStart();
          if (s.startsWith(OPEN)) {
            buf = s.slice(OPEN.length);
            state = "inside";
            opened = true;
            continue;
          }
          if (OPEN.startsWith(s)) break; // "", or a start of the marker: wait
          state = "after";
          lead = false;
          continue;
        }
        if (state === "inside") {
          const at = buf.indexOf(CLOSE);
          if (at < 0) {
            const keep = heldSuffix(buf, CLOSE);
            reasoning += reason(buf.slice(0, buf.length - keep));
            buf = buf.slice(buf.length - keep);
            break;
          }
          reasoning += reason(buf.slice(0, at));
          buf = buf.slice(at + CLOSE.length);
          state = "after";
          continue;
        }
        content += answer(buf);
        buf = "";
        break;
      }
      return { reasoning, content };
    },
    get phase() {
      return state;
    },
    get opened() {
      return opened;
    },
    finish() {
      const rest = buf;
      buf = "";
      if (state === "inside") return { reasoning: reason(rest), content: "" };
      return { reasoning: "", content: state === "start" ? rest : answer(rest) };
    },
  };
}
