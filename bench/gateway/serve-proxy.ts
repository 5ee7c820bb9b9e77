/**
 * The bare Bun proxies the gateway is measured against (minimal-proxy.ts for OpenAI JSON,
 * connect-proxy.ts for Connect): `--port N --upstream URL` from the command line, one
 * Bun.serve on loopback that hands each request and the upstream to `forward`.
 *
 * @example
 * serveProxy(async (req, upstream) => new Response((await fetch(upstream + "/health")).body));
 */
export function serveProxy(forward: (req: Request, upstream: string) => Promise<Response>): void {
  const argv = process.argv;
  const port = Number(argv[argv.indexOf("--port") + 1]);
  const upstream = argv[argv.indexOf("--upstream") + 1]!;
  Bun.serve({ hostname: "127.0.0.1", port, fetch: (req) => forward(req, upstream) });
}

/**
 * minimal-proxy.ts's handler (micro.ts calls it in process): the path without its /v1 onto
 * `upstream` (which ends in /v1), the body as JSON text, the answer's body piped back.
 */
export async function forwardOpenAI(req: Request, upstream: string): Promise<Response> {
  const url = new URL(req.url);
  const r = await fetch(upstream + url.pathname.replace(/^\/v1/, ""), {
    method: req.method,
    body: req.method === "POST" ? await req.text() : undefined,
    headers: { "content-type": "application/json" },
  });
  return new Response(r.body, { status: r.status, headers: { "content-type": r.headers.get("content-type") ?? "application/json" } });
}
