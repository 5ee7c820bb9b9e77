/**
 * Tool calls in a model's generated text, in the Hermes format that Qwen2.5, Qwen3, QwQ and other chat templates
 * announce: each call is `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (whitespace around the JSON
 * allowed). Fed the text as it is generated, the parser returns the content to show and the calls completed so far;
 * text that could still turn into a marker is held back until it cannot. A block whose JSON is not a call (not an
 * object with a string `name`) stays content, as does an unterminated block at the end, so nothing the model wrote
 * is lost. Whitespace between and after calls is not content. Pure: ids come from `newId`.
 *
 * @example
 * const p = createToolCallParser();
 * p.push('Let me check.<tool_call>\n{"name": "weather", "arg'); // { content: "Let me check.", calls: [] }
 * p.push('uments": {"city": "Paris"}}\n</tool_call>');         // { content: "", calls: [{ id, name: "weather", arguments: '{"city":"Paris"}' }] }
 * p.finish();                                                   // { content: "", calls: [] }
 */
import { heldSuffix } from "./held-suffix";

export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as a JSON text, as OpenAI's API carries them. */
  arguments: string;
}

export interface ToolCallParser {
  push(text: string): { content: string; calls: ToolCall[] };
  /** The end of the generation: whatever was held back, as content. */
  finish(): { content: string; calls: ToolCall[] };
  /** Calls returned so far. */
  readonly calls: number;
}

const OPEN = "<tool_call>";
const CLOSE = "</tool_call>";

/** Whether a chat template announces Hermes-style tool calls (it tells the model to write `<tool_call>`). */
export function templateHasToolCalls(template: string): boolean {
  return template.includes(OPEN) && template.includes(CLOSE);
}

function parseCall(body: string, id: string): ToolCall | null {
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch {
    return null;
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  if (typeof o.name !== "string" || o.name === "") return null;
  const args = o.arguments ?? o.parameters ?? {};
  return { id, name: o.name, arguments: typeof args === "string" ? args : JSON.stringify(args) };
}

export function newToolCallId(): string {
  return `call_${crypto.randomUUID().replace(/-/g, "").slice(0, 24)}`;
}

export function createToolCallParser(newId: () => string = newToolCallId): ToolCallParser {
  let buf = ""; // outside a call: a possible start of OPEN; inside: the call's text so far
  let inside = false;
  let count = 0;
  let blank = ""; // whitespace after a call, shown only if more content follows
  const show = (text: string): string => {
    if (count === 0 || text === "") return text;
    if (text.trim() === "") {
      blank += text;
      return "";
    }
    const out = blank + text;
    blank = "";
    return out;
  };
  return {
    push(text) {
      buf += text;
      let content = "";
      const calls: ToolCall[] = [];
      for (;;) {
        if (!inside) {
          const at = buf.indexOf(OPEN);
          if (at < 0) {
            const keep = heldSuffix(buf, OPEN);
            content += show(buf.slice(0, buf.length - keep));
            buf = buf.slice(buf.length - keep);
            break;
          }
          content += show(buf.slice(0, at));
          buf = buf.slice(at + OPEN.length);
          inside = true;
        } else {
          const end = buf.indexOf(CLOSE);
          if (end < 0) break;
          const body = buf.slice(0, end);
          buf = buf.slice(end + CLOSE.length);
          inside = false;
          const call = parseCall(body, newId());
          if (call) {
            calls.push(call);
            count++;
            blank = "";
          } else content += show(OPEN + body + CLOSE);
        }
      }
      return { content, calls };
    },
    finish() {
      const rest = inside ? OPEN + buf : buf;
      buf = "";
      inside = false;
      return { content: show(rest), calls: [] };
    },
    get calls() {
      return count;
    },
  };
}
