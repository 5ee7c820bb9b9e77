/**
 * The floor under the gateway's added TTFT: a Bun proxy that forwards a Connect call's bytes
 * to the model server and pipes the response body back, with no parsing, tokenizing, routing
 * or re-encoding (the same extra hop dispatch's gateway makes, nothing else). ttft-ab.ts runs
 * it with --proxy.
 *
 *   bun bench/gateway/connect-proxy.ts --port N --upstream http://127.0.0.1:U
 */
import { serveProxy } from "./serve-proxy";

serveProxy(async (req, upstream) => {
  const path = req.url.slice(req.url.indexOf("/", 8));
  const r = await fetch(upstream + path, {
    method: req.method,
    body: req.method === "POST" ? await req.bytes() : undefined,
    headers: { "content-type": req.headers.get("content-type") ?? "application/connect+proto", "connect-protocol-version": "1" },
  });
  return new Response(r.body, { status: r.status, headers: { "content-type": r.headers.get("content-type") ?? "application/connect+proto" } });
});
