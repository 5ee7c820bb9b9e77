/**
 * Wires a gateway from its configuration: backends, pool, health checks,
 * routing policy, metrics, logs and the HTTP app; `listen()` serves it with
 * Bun.serve. Used by `main.ts`, the tests and the benchmark.
 *
 * @example
 * const gw = await createGateway(config);
 * const server = gw.listen();        // config.server.host:port (0: any free port)
 * await gw.stop();
 */
import type { Server } from "bun";
import type { GatewayConfig } from "./config/schema";
import { createApp } from "./http/app";
import { createLogger, type Logger } from "./log/logger";
import { createMetrics, type Metrics } from "./metrics";
import type { Backend } from "./workers/backend";
import { createDispatchBackend } from "./workers/dispatch-backend";
import { createHealthChecker, type HealthChecker } from "./workers/health-checker";
import { createOpenAIBackend } from "./workers/openai-backend";
import { createPolicy } from "./workers/policies";
import { type BackendPool, createBackendPool } from "./workers/pool";
import { createRouter } from "./workers/router";

export interface Gateway {
  readonly config: GatewayConfig;
  readonly pool: BackendPool;
  readonly health: HealthChecker;
  readonly log: Logger;
  readonly metrics: Metrics;
  fetch(req: Request, server?: Server<unknown>): Response | Promise<Response>;
  listen(): Server<unknown>;
  stop(): Promise<void>;
}

export function createBackends(config: GatewayConfig): Backend[] {
  return config.backends.map((b) =>
    b.kind === "dispatch"
      ? createDispatchBackend({ id: b.id, url: b.url, protocol: b.protocol })
      : createOpenAIBackend({ id: b.id, url: b.url, apiKey: b.api_key || undefined, models: b.models }),
  );
}

export async function createGateway(
  config: GatewayConfig,
  o: { backends?: Backend[]; log?: Logger; rand?: () => number } = {},
): Promise<Gateway> {
  const log = o.log ?? createLogger({ level: config.logging.level });
  const policy = createPolicy(config.routing.policy);
  const pool = createBackendPool(o.backends ?? createBackends(config), {
    unhealthyAfter: config.health.unhealthy_after,
    healthyAfter: config.health.healthy_after,
  });
  pool.onChange((m) =>
    m.healthy
      ? log.info("backend healthy", { backend: m.backend.id, kind: m.backend.kind, models: m.backend.models() })
      : log.warn("backend ejected", { backend: m.backend.id, kind: m.backend.kind, error: m.lastError }),
  );
  const metrics = createMetrics(pool);
  const router = createRouter(pool, policy, o.rand);
  const app = createApp({ config, pool, router, log, metrics });
  const health = createHealthChecker(pool, { intervalMs: config.health.interval_ms, timeoutMs: config.health.timeout_ms });
  await health.start();
  for (const m of pool.members) {
    if (!m.healthy) log.warn("backend not healthy at start", { backend: m.backend.id, url: m.backend.url, error: m.lastError });
  }
  let server: Server<unknown> | undefined;
  return {
    config,
    pool,
    health,
    log,
    metrics,
    fetch: (req, s) => app.fetch(req, s),
    listen() {
      server = Bun.serve({
        hostname: config.server.host,
        port: config.server.port,
        // Our own 413 (OpenAI-shaped) fires first; Bun's limit is only a backstop.
        idleTimeout: config.server.idle_timeout_s,
        maxRequestBodySize: config.server.max_body_bytes * 2 + 1024,
        fetch: (req, s) => app.fetch(req, s),
      });
      log.info("listening", { url: `http://${server.hostname}:${server.port}`, policy: policy.name, backends: pool.members.length });
      return server;
    },
    async stop() {
      health.stop();
      await server?.stop(true);
      log.flush();
    },
  };
}
