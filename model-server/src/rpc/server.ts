/**
 * Serves ModelService on Bun: Connect and gRPC-web over HTTP/1.1 through
 * `createFetchHandler` on Bun.serve, plus `/healthz` (alive), `/readyz`
 * (serving) and `/metrics` (Prometheus text) on the same port. Where a peer
 * wants the gRPC protocol (HTTP/2), `grpcPort` adds an h2c listener through
 * `node:http2` (Bun.serve has no HTTP/2).
 *
 * @example
 * const state = createServingState();
 * const server = await startRpcServer({ state, host: "127.0.0.1", port: 0 });
 * console.log(server.url); // http://127.0.0.1:40123
 * await server.stop();
 */
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { createConnectRouter } from "@connectrpc/connect";
import { createFetchHandler } from "@connectrpc/connect/protocol";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { ModelService } from "@dispatch/proto/gen/dispatch/v1/model_service_pb";
import { createMetrics, type Metrics } from "./metrics";
import { createRequestGuard } from "./request-guard";
import { createModelService } from "./service";
import type { ServingState } from "./serving-state";

export interface RpcServerOptions {
  state: ServingState;
  host: string;
  /** 0: a free port. */
  port: number;
  /** Also serve gRPC over h2c on this port (0: a free port; undefined: off). */
  grpcPort?: number;
}

export interface RpcServer {
  /** Base URL of the HTTP/1.1 listener (Connect, gRPC-web, health, metrics). */
  readonly url: string;
  readonly port: number;
  /** Base URL of the h2c gRPC listener, when enabled. */
  readonly grpcUrl: string | null;
  /** What /metrics serves; the engine feeds `metrics.engine.step` per step. */
  readonly metrics: Metrics;
  stop(): Promise<void>;
}

const STREAMING_PATHS = new Set(["Generate", "WatchLoad", "WatchKvEvents"].map((m) => `/${ModelService.typeName}/${m}`));

export async function startRpcServer(opts: RpcServerOptions): Promise<RpcServer> {
  const metrics = createMetrics(opts.state);
  const service = createModelService(opts.state, metrics.engine);
  const router = createConnectRouter().service(ModelService, service);
  const handlers = new Map(router.handlers.map((h) => [h.requestPath, createFetchHandler(h)]));
  const guard = createRequestGuard(ModelService);
  const server = Bun.serve({
    hostname: opts.host,
    port: opts.port,
    async fetch(req, srv) {
      const path = new URL(req.url).pathname;
      const handler = handlers.get(path);
      if (handler) {
        // Streams can stay quiet longer than Bun's idle timeout (a queued Generate).
        if (STREAMING_PATHS.has(path)) srv.timeout(req, 0);
        const checked = await guard(req, path);
        return checked instanceof Response ? checked : handler(checked);
      }
      if (path === "/healthz") return new Response(opts.state.status === "failed" ? "failed\n" : "ok\n", { status: opts.state.status === "failed" ? 500 : 200 });
      if (path === "/readyz") {
        const ok = opts.state.status === "serving";
        return new Response(`${opts.state.status}: ${opts.state.message}\n`, { status: ok ? 200 : 503 });
      }
      if (path === "/metrics") return new Response(await metrics.render(), { headers: { "content-type": metrics.contentType } });
      return new Response("not found\n", { status: 404 });
    },
  });

  let h2: http2.Http2Server | null = null;
  let grpcUrl: string | null = null;
  if (opts.grpcPort !== undefined) {
    h2 = http2.createServer(connectNodeAdapter({ routes: (r) => r.service(ModelService, service), grpc: true, connect: true, grpcWeb: true }));
    try {
      await new Promise<void>((resolve, reject) => {
        h2!.once("error", reject);
        h2!.listen(opts.grpcPort, opts.host, () => resolve());
      });
    } catch (e) {
      await server.stop(true);  // the HTTP listener is up already: nothing may keep the port after a failed start
      throw e;
    }
    const addr = h2.address() as AddressInfo;
    grpcUrl = `http://${opts.host}:${addr.port}`;
  }

  return {
    url: `http://${opts.host}:${server.port}`,
    port: server.port!,
    grpcUrl,
    metrics,
    async stop() {
      await server.stop(true);
      // close() waits for clients to hang up their sessions; do not wait forever.
      if (h2) await Promise.race([new Promise<void>((resolve) => h2!.close(() => resolve())), Bun.sleep(1000)]);
    },
  };
}
