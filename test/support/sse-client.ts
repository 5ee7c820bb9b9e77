/**
 * One chat completion through the gateway's HTTP API with fetch, streamed or
 * not, classified the way a client would see it: ok (a `[DONE]` or a JSON
 * body), an HTTP error (status + OpenAI error body), an SSE error event after
 * streaming began, a hang (no byte for `stallMs`) or a broken connection.
 * Never throws.
 *
 * @example
 * const r = await chat(gw.url, { model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 8, stream: true });
 * if (r.kind === "sse-error") console.log(r.error);
 */
export type ChatOutcome =
  | { kind: "ok"; status: number; content: string; chunks: number; ms: number }
  | { kind: "http-error"; status: number; body: unknown; retryAfter: string | null; ms: number }
  | { kind: "sse-error"; status: number; error: unknown; chunks: number; errorEvents: number; ms: number }
  | { kind: "hang"; status: number; chunks: number; ms: number }
  | { kind: "broken"; status: number; chunks: number; message: string; ms: number }
  | { kind: "aborted"; status: number; chunks: number; ms: number };

export interface ChatOptions {
  /** No byte for this long counts as a hang (the request is then aborted). Default 10 s. */
  stallMs?: number;
  /** Abort the request after this many content chunks (a client going away mid-stream). */
  abortAfterChunks?: number;
  /** Called once with the first content chunk (streams only). */
  onFirstChunk?: () => void;
  headers?: Record<string, string>;
}

export async function chat(baseUrl: string, body: Record<string, unknown>, o: ChatOptions = {}): Promise<ChatOutcome> {
  const t0 = performance.now();
  const ms = () => Math.round(performance.now() - t0);
  const ctl = new AbortController();
  const stallMs = o.stallMs ?? 10_000;
  let stall = setTimeout(() => ctl.abort(), stallMs);
  const poke = () => {
    clearTimeout(stall);
    stall = setTimeout(() => ctl.abort(), stallMs);
  };
  let status = 0;
  let chunks = 0;
  let userAborted = false;
  try {
    const res = await fetch(`${baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...o.headers },
      body: JSON.stringify(body),
      signal: ctl.signal,
    });
    status = res.status;
    poke();
    if (res.status !== 200) {
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {}
      return { kind: "http-error", status, body: parsed, retryAfter: res.headers.get("retry-after"), ms: ms() };
    }
    if (!body.stream) {
      const json = (await res.json()) as { choices?: { message?: { content?: string } }[] };
      return { kind: "ok", status, content: json.choices?.[0]?.message?.content ?? "", chunks: 1, ms: ms() };
    }
    let content = "";
    let buf = "";
    let error: unknown;
    let errorEvents = 0;
    let done = false;
    const dec = new TextDecoder();
    for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) {
      poke();
      buf += dec.decode(bytes, { stream: true });
      let cut: number;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const frame = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        const data = frame
          .split("\n")
          .filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).trimStart())
          .join("\n");
        if (!data) continue;
        if (data === "[DONE]") {
          done = true;
          continue;
        }
        const ev = JSON.parse(data) as { error?: unknown; choices?: { delta?: { content?: string } }[] };
        if (ev.error) {
          errorEvents++;
          error = ev.error;
          continue;
        }
        const piece = ev.choices?.[0]?.delta?.content;
        if (piece) {
          content += piece;
          chunks++;
          if (chunks === 1) o.onFirstChunk?.();
          if (o.abortAfterChunks !== undefined && chunks >= o.abortAfterChunks) {
            userAborted = true;
            ctl.abort();
          }
        }
      }
    }
    if (errorEvents > 0) return { kind: "sse-error", status, error, chunks, errorEvents, ms: ms() };
    if (!done) return { kind: "broken", status, chunks, message: "stream ended without [DONE]", ms: ms() };
    return { kind: "ok", status, content, chunks, ms: ms() };
  } catch (err) {
    if (userAborted) return { kind: "aborted", status, chunks, ms: ms() };
    if (ctl.signal.aborted) return { kind: "hang", status, chunks, ms: ms() };
    return { kind: "broken", status, chunks, message: String(err), ms: ms() };
  } finally {
    clearTimeout(stall);
  }
}
