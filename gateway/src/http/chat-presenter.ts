/**
 * A generation's chat output re-presented in another API's shape (the Responses API, Anthropic's Messages API): a
 * Presenter (generate.ts) that wraps the started call, parses its chat SSE frames (the gateway's own, as text, or an
 * OpenAI-HTTP backend's bytes) and hands each chunk to the API's translator; not streaming, the whole chat body. The
 * translator's last output goes out only after its `end` / `body` resolved (a response is stored before it).
 *
 * @example
 * return generation(c, req, "responses", t0, chatPresenter(stream, translator));
 */
import type { GatewayError } from "../errors";
import { isObject, type Json } from "../openai/fields";
import { createSseParser } from "../openai/sse-parser";
import type { Call } from "../workers/backend";
import type { Presenter } from "./generate";

/** Typed events as SSE, each `event:` named by its type (the Responses and Messages APIs' framing). */
export const sseEvents = (evs: readonly { type: string; [k: string]: unknown }[]) => evs.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("");

export interface ChatTranslator {
  /** Streaming: what goes out first (with the first chunk's output), once the call has started. */
  start(call: Call): string;
  /** Streaming: the output for one chat chunk (or an `{error}` payload). */
  chunk(c: Json): string;
  /** Streaming: the last output, after the chat stream ended. */
  end(): Promise<string>;
  /** Not streaming: the body for the whole chat completion. */
  body(chat: Json): Promise<string>;
  /** The last output of a stream that failed after its first byte. */
  errorFrame(err: GatewayError): string;
}

export function chatPresenter(stream: boolean, t: ChatTranslator): Presenter {
  const parser = createSseParser();
  let first: string | null = null;
  const take = (call: Call) => {
    if (first !== null) return "";
    first = t.start(call);
    return first;
  };
  const translate = (out: string | Uint8Array): string => {
    let s = "";
    for (const data of typeof out === "string" ? parser.pushText(out) : parser.push(out)) {
      if (data === "[DONE]") continue;
      let c: unknown;
      try {
        c = JSON.parse(data);
      } catch {
        c = { error: { message: "The upstream sent an event that is not JSON.", code: "upstream_error" } };
      }
      if (isObject(c)) s += t.chunk(c);
    }
    return s;
  };
  return {
    wrap(inner: Call): Call {
      let ended = false;
      let body = "";
      return {
        backendId: inner.backendId,
        get stats() {
          return inner.stats;
        },
        close: () => inner.close(),
        ready() {
          const out = stream ? inner.ready?.() : undefined;
          return out ? take(inner) + translate(out) : undefined;
        },
        async next() {
          while (!ended) {
            const out = await inner.next();
            if (out === null) {
              ended = true;
              return stream ? take(inner) + (await t.end()) : await t.body(JSON.parse(body) as Json);
            }
            if (!stream) body += typeof out === "string" ? out : new TextDecoder().decode(out);
            else {
              const s = take(inner) + translate(out);
              if (s !== "") return s;
            }
          }
          return null;
        },
      };
    },
    errorFrame: (err) => t.errorFrame(err),
  };
}
