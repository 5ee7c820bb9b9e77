/**
 * Parses an upstream SSE body in layers, as openai-node does: bytes -> lines
 * -> events. Only `data:` fields matter for OpenAI streams; comments, `event:`
 * and `id:` lines are accepted and ignored. One parser per stream.
 *
 * @example
 * const p = createSseParser();
 * for (const data of p.push(bytes)) handle(data); // "{...}" or "[DONE]"
 * p.end(); // [] : an unterminated event is incomplete, never dispatched
 */
export interface SseParser {
  /** Feed bytes; returns the data payloads of events completed by them. */
  push(bytes: Uint8Array): string[];
  /** Feed text already decoded (frames the gateway made itself). */
  pushText(text: string): string[];
  /** End of input. An event not terminated by a blank line is dropped (as the SSE spec says). */
  end(): string[];
}

export function createSseParser(): SseParser {
  const decoder = new TextDecoder();
  let partial = ""; // an incomplete line
  let data: string | null = null; // the current event's data lines, joined by "\n"

  function line(l: string, out: string[]): void {
    if (l === "") {
      if (data !== null) out.push(data);
      data = null;
      return;
    }
    if (l.charCodeAt(0) === 58 /* ":" comment */) return;
    const colon = l.indexOf(":");
    const field = colon === -1 ? l : l.slice(0, colon);
    if (field !== "data") return;
    let value = colon === -1 ? "" : l.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    data = data === null ? value : `${data}\n${value}`;
  }

  return {
    push(bytes) {
      return this.pushText(decoder.decode(bytes, { stream: true }));
    },
    pushText(chunk) {
      const out: string[] = [];
      const text = partial + chunk;
      let start = 0;
      for (;;) {
        const nl = text.indexOf("\n", start);
        if (nl === -1) break;
        const end = nl > start && text.charCodeAt(nl - 1) === 13 ? nl - 1 : nl;
        line(text.slice(start, end), out);
        start = nl + 1;
      }
      partial = start === 0 ? text : text.slice(start);
      return out;
    },
    end() {
      decoder.decode();
      partial = "";
      data = null;
      return [];
    },
  };
}
