/**
 * A fault-injecting HTTP proxy placed in front of a real model server: the
 * gateway is pointed at the proxy, and the test switches its behaviour while
 * traffic flows. Faults, per request:
 *
 * - `pass`     forward unchanged (streams included)
 * - `hang`     accept the request and never answer (until the caller gives up)
 * - `slow`     wait `delayMs` before forwarding, and `delayMs` between response chunks
 * - `error`    answer HTTP 503 at once (what a crashing or overloaded server does)
 * - `drop`     forward; on Generate calls cut the connection after `dropAfterChunks`
 *              response chunks (a server dying mid-stream)
 *
 * @example
 * const px = createFaultProxy(ms.url);
 * const gw = await startGateway({ backends: [px.url] });
 * px.setFault({ mode: "hang" });
 */
import type { Server } from "bun";

export type Fault =
  | { mode: "pass" }
  | { mode: "hang" }
  | { mode: "slow"; delayMs: number }
  | { mode: "error"; status?: number }
  | { mode: "drop"; dropAfterChunks: number };

export interface FaultProxy {
  readonly url: string;
  setFault(f: Fault): void;
  /** Requests seen so far per fault mode and path suffix, e.g. counts.get("drop Generate"). */
  readonly counts: Map<string, number>;
  /** Generate streams that were cut by `drop`. */
  readonly dropped: () => number;
  stop(): void;
}

export function createFaultProxy(upstream: string): FaultProxy {
  let fault: Fault = { mode: "pass" };
  let dropped = 0;
  const counts = new Map<string, number>();
  const hanging = new Set<() => void>();
  const server: Server<unknown> = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const method = url.pathname.slice(url.pathname.lastIndexOf("/") + 1);
      const f = fault;
      const key = `${f.mode} ${method}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
      if (f.mode === "hang") {
        await new Promise<void>((resolve) => {
          hanging.add(resolve);
          req.signal.addEventListener("abort", () => resolve(), { once: true });
        });
        return new Response(null, { status: 499 });
      }
      if (f.mode === "error") return new Response("injected failure", { status: f.status ?? 503 });
      if (f.mode === "slow") await Bun.sleep(f.delayMs);
      const res = await fetch(`${upstream}${url.pathname}${url.search}`, {
        method: req.method,
        headers: req.headers,
        body: req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer(),
        signal: req.signal,
        decompress: false,
      } as RequestInit);
      if (!res.body) return new Response(null, { status: res.status, headers: res.headers });
      const upstreamBody = res.body;
      const cutAfter = f.mode === "drop" && method === "Generate" ? f.dropAfterChunks : Infinity;
      const delay = f.mode === "slow" ? f.delayMs : 0;
      let sent = 0;
      const reader = upstreamBody.getReader();
      const body = new ReadableStream<Uint8Array>({
        async pull(ctl) {
          if (sent >= cutAfter) {
            dropped++;
            reader.cancel().catch(() => {});
            // An error without a value resets the connection and is not logged by Bun.
            ctl.error(undefined);
            return;
          }
          if (delay > 0 && sent > 0) await Bun.sleep(delay);
          let r: Awaited<ReturnType<typeof reader.read>>;
          try {
            r = await reader.read();
          } catch {
            // The caller went away (a long-lived watch stream closed by the gateway): end quietly.
            ctl.error(undefined);
            return;
          }
          const { value, done } = r;
          if (done) return ctl.close();
          sent++;
          ctl.enqueue(value);
        },
        cancel() {
          reader.cancel().catch(() => {});
        },
      });
      const headers = new Headers(res.headers);
      headers.delete("content-length");
      return new Response(body, { status: res.status, headers });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    setFault(f) {
      fault = f;
      if (f.mode !== "hang") {
        for (const release of hanging) release();
        hanging.clear();
      }
    },
    counts,
    dropped: () => dropped,
    stop() {
      for (const release of hanging) release();
      server.stop(true);
    },
  };
}
