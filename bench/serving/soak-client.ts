/**
 * Sends one soak request (soak-mix.ts) to the gateway and records what came back: the status,
 * the error body's shape, the finish reason, the usage's token count, the streamed content
 * chunks, whether the client cancelled it and whether it ran past its time limit (a hang).
 * Never throws: a transport failure is the record's `error`.
 *
 * @example
 *   const rec = await sendSoakRequest("http://127.0.0.1:8080", req, 120_000);
 *   rec.status;        // 200
 *   rec.finishReason;  // "length"
 */
import type { SoakKind, SoakRequest } from "./soak-mix";
import { sseData } from "./sse-data";

export interface SoakRecord {
  index: number;
  kind: SoakKind;
  label: string;
  /** Streamed (then firstByteMs is the first data event: time to first token). */
  stream: boolean;
  /** HTTP status; 0 when no response came. */
  status: number;
  /** A transport failure, an error event in the stream, or the error body's message. */
  error?: string;
  /** An error body had OpenAI's shape: { error: { message: string, type: string, ... } }. */
  errorShapeOk?: boolean;
  finishReason?: string;
  /** Each choice's finish reason, by index (several choices: n, a batch of prompts). */
  finishes: Record<number, string>;
  /** Each choice's text, by index. */
  texts: Record<number, string>;
  /** usage.completion_tokens (streams: the final usage chunk). */
  outputTokens?: number;
  /** usage.prompt_tokens, likewise. */
  promptTokens?: number;
  /** Streamed chunks that carried content. */
  contentChunks: number;
  /** Streamed chunks with log-probabilities. */
  logprobChunks: number;
  /** The streamed or returned text. */
  text: string;
  /** The client aborted it after `cancelAfter` chunks. */
  cancelled: boolean;
  /** It ran past the time limit and was aborted: a hung request. */
  timedOut: boolean;
  /** After the send: the first data event (streams) or the whole body read (not streamed), and the end. */
  firstByteMs?: number;
  durationMs: number;
}

interface Choice {
  index?: number;
  text?: string;
  delta?: { content?: string | null };
  message?: { content?: string | null };
  finish_reason?: string | null;
  logprobs?: unknown;
}
/** A Responses API object or stream event (the fields the record reads). */
interface ResponseLike {
  type?: string;
  status?: string;
  output?: { type: string; content?: { type: string; text?: string }[] }[];
  usage?: { input_tokens?: number; output_tokens?: number } | null;
  response?: ResponseLike;
  delta?: string;
  logprobs?: unknown[];
  message?: string;
  error?: { message?: string; type?: string; code?: string | null } | null;
}

/** A response's end as a chat finish reason: completed "stop", incomplete (max_output_tokens) "length". */
const finishOf = (status: string | undefined) => (status === "completed" ? "stop" : status === "incomplete" ? "length" : status);

/** The text of a response's message items. */
const outputText = (r: ResponseLike) =>
  (r.output ?? []).flatMap((o) => (o.type === "message" ? (o.content ?? []).map((p) => p.text ?? "") : [])).join("");

interface Chunk {
  choices?: Choice[];
  usage?: { completion_tokens?: number; prompt_tokens?: number } | null;
  error?: { message?: string; type?: string };
}

const contentOf = (c: Choice): string => c.text ?? c.delta?.content ?? c.message?.content ?? "";

export async function sendSoakRequest(base: string, req: SoakRequest, timeoutMs: number): Promise<SoakRecord> {
  const rec: SoakRecord = { index: req.index, kind: req.kind, label: req.label, stream: req.stream, status: 0, contentChunks: 0, logprobChunks: 0, text: "", finishes: {}, texts: {}, cancelled: false, timedOut: false, durationMs: 0 };
  const t0 = performance.now();
  const ctl = new AbortController();
  const timer = setTimeout(() => {
    rec.timedOut = true;
    ctl.abort();
  }, timeoutMs);
  try {
    const res = await fetch(`${base}${req.path}`, {
      method: "POST",
      signal: ctl.signal,
      headers: { "content-type": "application/json" },
      body: typeof req.body === "string" ? req.body : JSON.stringify(req.body),
    });
    rec.status = res.status;
    if (!res.ok || !res.body) {
      const text = await res.text();
      rec.firstByteMs = performance.now() - t0;
      readErrorBody(rec, text);
      return rec;
    }
    if (req.path === "/v1/messages") {
      await readMessage(rec, res, req, t0);
      return rec;
    }
    if (req.path === "/v1/responses") {
      await readResponse(rec, res, req, t0);
      return rec;
    }
    if (!req.stream) {
      const body = (await res.json()) as Chunk;
      rec.firstByteMs = performance.now() - t0;
      const c = body.choices?.[0];
      if (c) {
        rec.text = contentOf(c);
        rec.finishReason = c.finish_reason ?? undefined;
      }
      for (const ch of body.choices ?? []) {
        rec.texts[ch.index ?? 0] = contentOf(ch);
        if (ch.finish_reason) rec.finishes[ch.index ?? 0] = ch.finish_reason;
      }
      rec.outputTokens = body.usage?.completion_tokens;
      rec.promptTokens = body.usage?.prompt_tokens;
      return rec;
    }
    await readStream(rec, res.body, req, ctl, t0);
  } catch (e) {
    if (!rec.cancelled && !rec.timedOut) rec.error = e instanceof Error ? e.message : String(e);
  } finally {
    clearTimeout(timer);
    rec.durationMs = performance.now() - t0;
  }
  return rec;
}

function readErrorBody(rec: SoakRecord, text: string): void {
  try {
    const err = (JSON.parse(text) as Chunk).error;
    rec.error = err?.message ?? text.slice(0, 300);
    rec.errorShapeOk = typeof err?.message === "string" && err.message.length > 0 && typeof err.type === "string";
  } catch {
    rec.error = text.slice(0, 300);
    rec.errorShapeOk = false;
  }
}

/** A Responses API answer: one Response object, or its events (text deltas, then completed / incomplete / failed). */
async function readResponse(rec: SoakRecord, res: Response, req: SoakRequest, t0: number): Promise<void> {
  const end = (r: ResponseLike) => {
    rec.finishReason = finishOf(r.status);
    if (rec.finishReason) rec.finishes[0] = rec.finishReason;
    rec.outputTokens = r.usage?.output_tokens;
    rec.promptTokens = r.usage?.input_tokens;
    if (r.status === "failed") rec.error = r.error?.message ?? "response failed";
  };
  if (!req.stream) {
    const r = (await res.json()) as ResponseLike;
    rec.firstByteMs = performance.now() - t0;
    rec.text = rec.texts[0] = outputText(r);
    end(r);
    return;
  }
  for await (const { data, at } of sseData(res.body!)) {
    rec.firstByteMs ??= at - t0;
    const ev = JSON.parse(data) as ResponseLike;
    if (ev.type === "response.output_text.delta" && ev.delta) {
      rec.text += ev.delta;
      rec.texts[0] = rec.text;
      rec.contentChunks++;
      if (ev.logprobs?.length) rec.logprobChunks++;
    } else if ((ev.type === "response.completed" || ev.type === "response.incomplete" || ev.type === "response.failed") && ev.response) end(ev.response);
    else if (ev.type === "error") {
      rec.error = ev.message ?? "stream error";
      rec.errorShapeOk = typeof ev.message === "string";
    }
  }
}

/** An Anthropic message's stop reason as a chat finish reason. */
const finishOfStop = (r: string | null | undefined) => (r === "max_tokens" ? "length" : r === "tool_use" ? "tool_calls" : r ? "stop" : undefined);

interface MessageLike {
  type?: string;
  content?: { type: string; text?: string }[];
  stop_reason?: string | null;
  usage?: { input_tokens?: number; output_tokens?: number; cache_read_input_tokens?: number };
  delta?: { type?: string; text?: string; stop_reason?: string | null };
  error?: { type?: string; message?: string };
}

/** An Anthropic Messages API answer: one message, or its events (text deltas, message_delta, or an error event). */
async function readMessage(rec: SoakRecord, res: Response, req: SoakRequest, t0: number): Promise<void> {
  const usage = (u: MessageLike["usage"]) => {
    if (!u) return;
    rec.outputTokens = u.output_tokens;
    rec.promptTokens = (u.input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0);
  };
  if (!req.stream) {
    const m = (await res.json()) as MessageLike;
    rec.firstByteMs = performance.now() - t0;
    rec.text = rec.texts[0] = (m.content ?? []).map((b) => (b.type === "text" ? (b.text ?? "") : "")).join("");
    rec.finishReason = finishOfStop(m.stop_reason);
    if (rec.finishReason) rec.finishes[0] = rec.finishReason;
    usage(m.usage);
    return;
  }
  for await (const { data, at } of sseData(res.body!)) {
    rec.firstByteMs ??= at - t0;
    const ev = JSON.parse(data) as MessageLike;
    if (ev.type === "content_block_delta" && ev.delta?.type === "text_delta" && ev.delta.text) {
      rec.text += ev.delta.text;
      rec.texts[0] = rec.text;
      rec.contentChunks++;
    } else if (ev.type === "message_delta") {
      rec.finishReason = finishOfStop(ev.delta?.stop_reason);
      if (rec.finishReason) rec.finishes[0] = rec.finishReason;
      usage(ev.usage);
    } else if (ev.type === "error") {
      rec.error = ev.error?.message ?? "stream error";
      rec.errorShapeOk = typeof ev.error?.message === "string" && typeof ev.error?.type === "string";
    }
  }
}

/** Server-sent events: `data: <json>` lines, `data: [DONE]` at the end. */
async function readStream(rec: SoakRecord, body: ReadableStream<Uint8Array>, req: SoakRequest, ctl: AbortController, t0: number): Promise<void> {
  for await (const { data, at } of sseData(body)) {
    rec.firstByteMs ??= at - t0;
    const ev = JSON.parse(data) as Chunk;
    if (ev.error) {
      rec.error = ev.error.message ?? "stream error";
      rec.errorShapeOk = typeof ev.error.message === "string" && typeof ev.error.type === "string";
    }
    for (const c of ev.choices ?? []) {
      const text = contentOf(c);
      const i = c.index ?? 0;
      if (text) {
        rec.text += text;
        rec.texts[i] = (rec.texts[i] ?? "") + text;
        rec.contentChunks++;
      }
      if (c.logprobs) rec.logprobChunks++;
      if (c.finish_reason) rec.finishReason = rec.finishes[i] = c.finish_reason;
    }
    if (ev.usage?.completion_tokens !== undefined) rec.outputTokens = ev.usage.completion_tokens;
    if (ev.usage?.prompt_tokens !== undefined) rec.promptTokens = ev.usage.prompt_tokens;
    if (req.cancelAfter !== undefined && rec.contentChunks >= req.cancelAfter && !rec.finishReason) {
      rec.cancelled = true;
      ctl.abort();
      return;
    }
  }
}
