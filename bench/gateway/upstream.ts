/**
 * The benchmark's upstream: a minimal, fast OpenAI-compatible fake on
 * Bun.serve. Responses are built once at start: a streaming chat completion
 * of exactly 64 content chunks (plus the finish chunk and [DONE]) and a
 * non-streaming chat completion. It only decides stream vs not by looking
 * for `"stream":true` in the body.
 *
 *   bun bench/gateway/upstream.ts --port N
 */
const port = Number(process.argv[process.argv.indexOf("--port") + 1] || 0);
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

const server = Bun.serve({
  hostname: "127.0.0.1",
  port,
  async fetch(req) {
    if (req.method === "GET") return new Response(models, { headers: { "content-type": "application/json" } });
    const body = await req.text();
    if (body.includes('"stream":true')) return new Response(sseBytes, { headers: { "content-type": "text/event-stream" } });
    return new Response(json, { headers: { "content-type": "application/json" } });
  },
});
console.log(JSON.stringify({ upstream: `http://127.0.0.1:${server.port}` }));
export {};
