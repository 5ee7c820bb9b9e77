/**
 * Builds a Response's output items from a chat completion, streamed or whole, and the Responses API's stream events
 * along the way. Pure: feed it chat chunks (`chunk`) or a chat body (`completion`), then `end`; each call returns the
 * events it caused, in order, numbered from the `response.created` that `start` returns. Reasoning becomes a
 * `reasoning` item, content a `message` item with one `output_text` part, each tool call a `function_call` item; a
 * change of kind closes the open item (its `.done` events) and opens the next. `finish_reason: "length"` makes the
 * response `incomplete` (`max_output_tokens`); an error payload or a stream that ends without a finish makes it
 * `failed`, then an `error` event.
 *
 * @example
 * const b = createOutputBuilder(base);
 * send(b.start()); for (const c of chunks) send(b.chunk(c)); send(b.end());
 * b.response; // the final Response object
 */
import { reasoningOf, toolCallDelta } from "../openai/chat-delta";
import { isObject, type Json } from "../openai/fields";
import { type Item, newItemId } from "./items";

export interface ResponseEvent {
  type: string;
  sequence_number: number;
  [k: string]: unknown;
}

export interface OutputBuilder {
  /** `response.created` and `response.in_progress`. */
  start(): ResponseEvent[];
  /** One chat.completion.chunk (or an `{error}` payload). */
  chunk(c: Json): ResponseEvent[];
  /** A whole chat.completion body. */
  completion(body: Json): ResponseEvent[];
  /** Closes what is open and ends the response (completed, incomplete or failed). */
  end(): ResponseEvent[];
  /** The Response object as it stands (final after `end`). */
  readonly response: Json;
}

type Open =
  | { kind: "reasoning"; index: number; item: Item; text: string }
  | { kind: "message"; index: number; item: Item; text: string; logprobs: Json[] }
  | { kind: "function_call"; index: number; item: Item; tool: number };

/** A chat logprobs entry in the Responses form (bytes always an array). */
function logprob(e: Json): Json {
  const top = Array.isArray(e.top_logprobs) ? (e.top_logprobs as Json[]) : [];
  return {
    token: e.token,
    bytes: Array.isArray(e.bytes) ? e.bytes : [],
    logprob: e.logprob,
    top_logprobs: top.map((t) => ({ token: t.token, bytes: Array.isArray(t.bytes) ? t.bytes : [], logprob: t.logprob })),
  };
}

/**
 * base: the Response object's fields other than status, output, usage, error and incomplete_details (id, created_at,
 * model and the request's echoed settings).
 */
export function createOutputBuilder(base: Json): OutputBuilder {
  const output: Item[] = [];
  const response: Json = { ...base, status: "in_progress", error: null, incomplete_details: null, output, usage: null };
  let seq = 0;
  let open: Open | null = null;
  let finish: string | null = null;
  let ended = false;
  let failed: { code: string | null; message: string; param: string | null; type: string } | null = null;
  const toolItems = new Map<number, Open & { kind: "function_call" }>();

  const ev = (type: string, fields: Json): ResponseEvent => ({ type, sequence_number: seq++, ...fields });
  // Events hold copies of what changes later: a shallow copy suffices (an item's content is replaced at its close,
  // never changed in place; the response's output grows, so a snapshot takes a copy of the list). structuredClone
  // cost ~90 us per request here (Bun), most of this API's overhead over chat.
  const snapshot = () => ({ ...response, output: output.map((it) => ({ ...it })) });

  function close(status: "completed" | "incomplete"): ResponseEvent[] {
    const o = open;
    if (!o) return [];
    open = null;
    const at = { item_id: o.item.id, output_index: o.index };
    const out: ResponseEvent[] = [];
    if (o.kind === "reasoning") {
      const part = { type: "reasoning_text", text: o.text };
      o.item.content = [part];
      out.push(ev("response.reasoning_text.done", { ...at, content_index: 0, text: o.text }), ev("response.content_part.done", { ...at, content_index: 0, part }));
    } else if (o.kind === "message") {
      const part = { type: "output_text", text: o.text, annotations: [], logprobs: o.logprobs };
      o.item.content = [part];
      out.push(
        ev("response.output_text.done", { ...at, content_index: 0, text: o.text, logprobs: o.logprobs }),
        ev("response.content_part.done", { ...at, content_index: 0, part }),
      );
    } else {
      out.push(ev("response.function_call_arguments.done", { ...at, arguments: o.item.arguments }));
    }
    o.item.status = status;
    out.push(ev("response.output_item.done", { output_index: o.index, item: { ...o.item } }));
    return out;
  }

  function openItem(next: Open, part?: Json): ResponseEvent[] {
    const out = close("completed");
    open = next;
    output.push(next.item);
    out.push(ev("response.output_item.added", { output_index: next.index, item: { ...next.item } }));
    if (part) out.push(ev("response.content_part.added", { item_id: next.item.id, output_index: next.index, content_index: 0, part }));
    return out;
  }

  function reasoning(text: string): ResponseEvent[] {
    if (text === "") return [];
    const out: ResponseEvent[] = [];
    if (open?.kind !== "reasoning") {
      const item: Item = { id: newItemId("rs"), type: "reasoning", summary: [], content: [], status: "in_progress" };
      out.push(...openItem({ kind: "reasoning", index: output.length, item, text: "" }, { type: "reasoning_text", text: "" }));
    }
    const o = open as Open & { kind: "reasoning" };
    o.text += text;
    out.push(ev("response.reasoning_text.delta", { item_id: o.item.id, output_index: o.index, content_index: 0, delta: text }));
    return out;
  }

  function content(text: string, lps: Json[]): ResponseEvent[] {
    if (text === "" && lps.length === 0) return [];
    const out: ResponseEvent[] = [];
    if (open?.kind !== "message") {
      const item: Item = { id: newItemId("msg"), type: "message", status: "in_progress", role: "assistant", content: [] };
      out.push(...openItem({ kind: "message", index: output.length, item, text: "", logprobs: [] }, { type: "output_text", text: "", annotations: [], logprobs: [] }));
    }
    const o = open as Open & { kind: "message" };
    o.text += text;
    o.logprobs.push(...lps);
    out.push(ev("response.output_text.delta", { item_id: o.item.id, output_index: o.index, content_index: 0, delta: text, logprobs: lps }));
    return out;
  }

  /** A tool call's delta: its chat index, and (first delta) id and name, and a piece of its arguments. */
  function toolCall(tc: Json, k: number): ResponseEvent[] {
    const { index, id, name, args } = toolCallDelta(tc, k);
    const out: ResponseEvent[] = [];
    let o = toolItems.get(index);
    if (!o) {
      const item: Item = {
        id: newItemId("fc"),
        type: "function_call",
        status: "in_progress",
        arguments: "",
        call_id: id ?? newItemId("call"),
        name: name ?? "",
      };
      o = { kind: "function_call", index: output.length, item, tool: index };
      toolItems.set(index, o);
      out.push(...openItem(o));
    } else if (open !== o) {
      return []; // a late piece of a call already closed: nothing in the chat protocol sends one
    }
    if (args !== "") {
      o.item.arguments += args;
      out.push(ev("response.function_call_arguments.delta", { item_id: o.item.id, output_index: o.index, delta: args }));
    }
    return out;
  }

  function usage(u: unknown): void {
    if (!isObject(u)) return;
    const details = isObject(u.prompt_tokens_details) ? u.prompt_tokens_details : {};
    const outDetails = isObject(u.completion_tokens_details) ? u.completion_tokens_details : {};
    const input = Number(u.prompt_tokens ?? 0);
    const completion = Number(u.completion_tokens ?? 0);
    response.usage = {
      input_tokens: input,
      input_tokens_details: { cached_tokens: Number(details.cached_tokens ?? 0) },
      output_tokens: completion,
      output_tokens_details: { reasoning_tokens: Number(outDetails.reasoning_tokens ?? 0) },
      total_tokens: Number(u.total_tokens ?? input + completion),
    };
  }

  function fail(e: Json): ResponseEvent[] {
    failed = {
      code: typeof e.code === "string" ? e.code : null,
      message: typeof e.message === "string" ? e.message : "The upstream failed.",
      param: typeof e.param === "string" ? e.param : null,
      type: typeof e.type === "string" ? e.type : "server_error",
    };
    return [];
  }

  function choiceDelta(choice: Json, message: Json, whole: boolean): ResponseEvent[] {
    const out: ResponseEvent[] = [];
    const r = reasoningOf(message);
    if (r !== undefined) out.push(...reasoning(r));
    const lp = isObject(choice.logprobs) && Array.isArray(choice.logprobs.content) ? (choice.logprobs.content as Json[]).map(logprob) : [];
    if (typeof message.content === "string") out.push(...content(message.content, lp));
    if (Array.isArray(message.tool_calls)) {
      (message.tool_calls as Json[]).forEach((tc, k) => {
        // a whole message's calls are each complete: close one before the next
        if (whole && k > 0) out.push(...close("completed"));
        out.push(...toolCall(tc, k));
      });
    }
    if (typeof choice.finish_reason === "string") finish = choice.finish_reason;
    return out;
  }

  return {
    start() {
      return [ev("response.created", { response: snapshot() }), ev("response.in_progress", { response: snapshot() })];
    },
    chunk(c) {
      if (ended) return [];
      if (isObject(c.error)) return fail(c.error);
      if (c.usage) usage(c.usage);
      const choice = Array.isArray(c.choices) ? (c.choices as Json[])[0] : undefined;
      if (!isObject(choice)) return [];
      return choiceDelta(choice, isObject(choice.delta) ? choice.delta : {}, false);
    },
    completion(body) {
      usage(body.usage);
      const choice = Array.isArray(body.choices) ? (body.choices as Json[])[0] : undefined;
      if (!isObject(choice)) return fail({ message: "The upstream's completion has no choice." });
      return choiceDelta(choice, isObject(choice.message) ? choice.message : {}, true);
    },
    end() {
      if (ended) return [];
      ended = true;
      if (!failed && finish === null) fail({ message: "The upstream stream ended before the response finished.", code: "upstream_error" });
      const cut = finish === "length";
      const out = close(failed || cut ? "incomplete" : "completed");
      if (failed) {
        response.status = "failed";
        response.error = { code: failed.code === "rate_limit_exceeded" ? failed.code : "server_error", message: failed.message };
        out.push(ev("response.failed", { response: snapshot() }), ev("error", { code: failed.code, message: failed.message, param: failed.param }));
        return out;
      }
      response.status = cut ? "incomplete" : "completed";
      if (cut) response.incomplete_details = { reason: "max_output_tokens" };
      else response.completed_at = Math.floor(Date.now() / 1000);
      out.push(ev(cut ? "response.incomplete" : "response.completed", { response: snapshot() }));
      return out;
    },
    get response() {
      return response;
    },
  };
}
