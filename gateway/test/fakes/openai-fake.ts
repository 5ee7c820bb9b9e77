/**
 * A fake OpenAI-compatible HTTP server (vLLM-like) for tests only. Streams a
 * scripted reply as chat or text-completion chunks, can fail in chosen ways,
 * and records when a client went away mid-stream.
 */
export interface OpenAIFake {
  url: string;
  models: string[];
  /** Content pieces, one chunk each. */
  pieces: string[];
  delayMs: number;
  /** Answer the next N generation calls with this status (and an OpenAI error body). */
  failStatus: number;
  failCount: number;
  /** Close the stream after this many chunks without [DONE]; -1: never. */
  dropAfter: number;
  bodies: string[];
  cancels: number[];
  /** vLLM gauges served at /metrics (beside /v1); null: 404. */
  metrics: { running: number; waiting: number } | null;
  stop(): void;
}

const enc = new TextEncoder();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function startOpenAIFake(o: { models?: string[] } = {}): OpenAIFake {
  const fake: OpenAIFake = {
    url: "",
    models: o.models ?? ["upstream-model"],
    pieces: ["Hel", "lo", " from", " upstream"],
    delayMs: 0,
    failStatus: 0,
    failCount: 0,
    dropAfter: -1,
    bodies: [],
    cancels: [],
    metrics: null,
    stop: () => {},
  };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      if (path === "/metrics") {
        if (!fake.metrics) return new Response("nope", { status: 404 });
        const m = fake.metrics;
        return new Response(`vllm:num_requests_running{model_name="m"} ${m.running}\nvllm:num_requests_waiting{model_name="m"} ${m.waiting}\nvllm:kv_cache_usage_perc{model_name="m"} 0.5\n`);
      }
      if (path === "/v1/models") {
        return Response.json({ object: "list", data: fake.models.map((id) => ({ id, object: "model", created: 0, owned_by: "fake" })) });
      }
      if (path === "/v1/embeddings") {
        // vLLM's embeddings answer: one vector per input, the server's id in the data
        const text = await req.text();
        fake.bodies.push(text);
        if (fake.failCount > 0) {
          fake.failCount--;
          return Response.json({ error: { message: `injected ${fake.failStatus}`, type: "server_error", param: null, code: null } }, { status: fake.failStatus });
        }
        const body = JSON.parse(text) as { model: string; input: string | string[] };
        const inputs = Array.isArray(body.input) ? body.input : [body.input];
        return Response.json({ object: "list", model: body.model, data: inputs.map((t, index) => ({ object: "embedding", index, embedding: [t.length, fake.url.length, 0.5] })), usage: { prompt_tokens: inputs.length, total_tokens: inputs.length } });
      }
      if (path !== "/v1/chat/completions" && path !== "/v1/completions") return Response.json({ error: { message: `no route ${path}`, type: "invalid_request_error", param: null, code: null } }, { status: 404 });
      const text = await req.text();
      fake.bodies.push(text);
      if (fake.failCount > 0) {
        fake.failCount--;
        return Response.json({ error: { message: `injected ${fake.failStatus}`, type: "server_error", param: null, code: null } }, { status: fake.failStatus });
      }
      const body = JSON.parse(text) as { model: string; stream?: boolean; stream_options?: { include_usage?: boolean } };
      const chat = path === "/v1/chat/completions";
      const base = { id: "up-1", object: chat ? "chat.completion.chunk" : "text_completion", created: 1, model: body.model };
      const choice = (t: string, fin: string | null) =>
        chat ? { index: 0, delta: { content: t }, logprobs: null, finish_reason: fin } : { text: t, index: 0, logprobs: null, finish_reason: fin };
      const usage = { prompt_tokens: 5, completion_tokens: fake.pieces.length, total_tokens: 5 + fake.pieces.length };
      if (!body.stream) {
        const full = fake.pieces.join("");
        return Response.json({
          id: "up-1",
          object: chat ? "chat.completion" : "text_completion",
          created: 1,
          model: body.model,
          choices: [chat ? { index: 0, message: { role: "assistant", content: full }, finish_reason: "stop" } : { text: full, index: 0, finish_reason: "stop" }],
          usage,
        });
      }
      let finished = false;
      req.signal.addEventListener("abort", () => {
        if (!finished) fake.cancels.push(performance.now());
      });
      const stream = new ReadableStream<Uint8Array>({
        async start(ctrl) {
          try {
            for (let i = 0; i < fake.pieces.length; i++) {
              if (fake.delayMs) await sleep(fake.delayMs);
              if (req.signal.aborted) return;
              if (fake.dropAfter >= 0 && i === fake.dropAfter) {
                finished = true;
                ctrl.close();
                return;
              }
              ctrl.enqueue(enc.encode(`data: ${JSON.stringify({ ...base, choices: [choice(fake.pieces[i]!, null)] })}\n\n`));
            }
            ctrl.enqueue(enc.encode(`data: ${JSON.stringify({ ...base, choices: [choice("", "stop")] })}\n\n`));
            if (body.stream_options?.include_usage) ctrl.enqueue(enc.encode(`data: ${JSON.stringify({ ...base, choices: [], usage })}\n\n`));
            ctrl.enqueue(enc.encode("data: [DONE]\n\n"));
            finished = true;
            ctrl.close();
          } catch {
            // the client went away
          }
        },
      });
      return new Response(stream, { headers: { "content-type": "text/event-stream" } });
    },
  });
  fake.url = `http://127.0.0.1:${server.port}/v1`;
  fake.stop = () => void server.stop(true);
  return fake;
}
