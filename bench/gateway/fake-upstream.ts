/**
 * The benchmark's fake OpenAI-compatible upstream, as a fetch handler. Responses
 * are built once: a streaming chat completion of exactly 64 content chunks (plus
 * the finish chunk and [DONE]) and a non-streaming chat completion. It decides
 * stream vs not by looking for `"stream":true` in the body. Served on its own
 * by `upstream.ts` (the wrk benchmark) and in process by `micro.ts`.
 *
 * @example
 * const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: fakeUpstreamFetch });
 */
const CHUNKS = 64;

const base = { id: "chatcmpl-bench", object: "chat.completion.chunk", created: 1700000000, model: "bench-model", system_fingerprint: null };
let sse = "";
sse += `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }] })}\n\n`;
for (let i = 0; i < CHUNKS; i++) {
  sse += `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: { content: ` tok${i}` }, logprobs: null, finish_reason: null }] })}\n\n`;
}
sse += `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: "stop" }] })}\n\n`;
sse += "data: [DONE]\n\n";
const sseBytes = new TextEncoder().encode(sse);
const json = JSON.stringify({
  id: "chatcmpl-bench",
  object: "chat.completion",
  created: 1700000000,
  model: "bench-model",
  choices: [{ index: 0, message: { role: "assistant", content: Array.from({ length: CHUNKS }, (_, i) => ` tok${i}`).join("") }, logprobs: null, finish_reason: "stop" }],
  usage: { prompt_tokens: 12, completion_tokens: CHUNKS, total_tokens: 12 + CHUNKS },
});
const models = JSON.stringify({ object: "list", data: [{ id: "bench-model", object: "model", created: 0, owned_by: "bench" }] });

export async function fakeUpstreamFetch(req: Request): Promise<Response> {
  if (req.method === "GET") return new Response(models, { headers: { "content-type": "application/json" } });
  const body = await req.text();
  if (body.includes('"stream":true')) return new Response(sseBytes, { headers: { "content-type": "text/event-stream" } });
  return new Response(json, { headers: { "content-type": "application/json" } });
}
