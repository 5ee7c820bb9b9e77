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
import Redis from "ioredis";
import { type AccessControl, createAccessControl } from "./auth/access-control";
import type { GatewayConfig } from "./config/schema";
import { createDiscovery } from "./discovery/create-discovery";
import { diffBackends } from "./discovery/diff-backends";
import type { DiscoveredBackend, Discovery } from "./discovery/discovery";
import { createApp } from "./http/app";
import { createLogger, type Logger } from "./log/logger";
import { createMetrics, type Metrics } from "./metrics";
import type { Backend } from "./workers/backend";
import { createDispatchBackend } from "./workers/dispatch-backend";
import { createHealthChecker, type HealthChecker } from "./workers/health-checker";
import { createOpenAIBackend } from "./workers/openai-backend";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { createFileStore } from "./batches/file-store";
import { createRedisSharedState } from "./state/redis-shared-state";
import { createRedisStore } from "./responses/redis-store";
import { createMemoryStore, type ResponseStore } from "./responses/store";
import { createMemoryConversations, createRedisConversations } from "./responses/conversations";
import { createAwareRouter } from "./workers/aware-router";
import { checkPolicyName, createPolicy, isBaselinePolicy } from "./workers/policies";
import { type BackendPool, createBackendPool } from "./workers/pool";
import { createBaselineRouter, type RequestRouter } from "./workers/request-router";
import { registerProductionMetrics } from "./telemetry/metrics";
import { createRequestTelemetryFactory } from "./telemetry/request-telemetry";
import { ttftBegin, ttftMarksOn } from "./telemetry/ttft-marks";

export interface Gateway {
  readonly config: GatewayConfig;
  readonly pool: BackendPool;
  /** The request router (an `AwareRouter` for every policy but the two baselines). */
  readonly router: RequestRouter;
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
      ? createDispatchBackend({ id: b.id, url: b.url, protocol: b.protocol, connectTimeoutMs: config.upstream.connect_timeout_ms, reasoning: config.server.reasoning_parser !== "off" })
      : createOpenAIBackend({ id: b.id, url: b.url, apiKey: b.api_key || undefined, models: b.models, metricsUrl: b.metrics_url || undefined }),
  );
}

export async function createGateway(
  config: GatewayConfig,
  o: { backends?: Backend[]; log?: Logger; rand?: () => number; /** Shared-state replica id (default POD_NAME, else host-pid). */ replicaId?: string } = {},
): Promise<Gateway> {
  const log = o.log ?? createLogger({ level: config.logging.level });
  checkPolicyName(config.routing.policy);
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
  const router = createGatewayRouter(config, pool, log, o.rand, o.replicaId);
  const policy = router.policy;
  const redis = config.redis.url ? connectRedis(config.redis.url, log) : undefined;
  let discovery: Discovery | undefined;
  const production = registerProductionMetrics(metrics.registry, {
    discoveredBackends: () => [
      { source: "static", count: config.backends.length },
      ...(discovery ? [{ source: "kubernetes", count: discovery.current().length }] : []),
    ],
  });
  discovery = await startDiscovery(config, pool, log, (source) => production.discoveryError(source));
  const access: AccessControl = createAccessControl({
    pepper: config.auth.pepper,
    keys: config.auth.keys,
    redis,
    // A pepper with Redis turns hashed-key auth on even before any key is in the config (keys in Redis).
    required: !!config.auth.pepper && !!redis,
    onEvent: (e) =>
      e.kind === "auth_failure" ? production.authFailure(e.reason) : e.kind === "rate_limited" ? production.rateLimited(e.limit) : production.rateLimitFallback(e.reason),
  });
  const telemetry = createRequestTelemetryFactory({ metrics: production, policy: policy.name });
  const responses = createResponseStore(config, redis);
  const conversations = responses && (responses.kind === "redis" ? createRedisConversations(redis!, { ttlS: config.responses.ttl_s }) : createMemoryConversations({ maxEntries: config.responses.max_entries, maxBytes: config.responses.max_bytes }));
  const files = await createFileStore({ dir: config.batches.dir || join(tmpdir(), "dispatch-files") });
  const app = createApp({ config, pool, router, log, metrics, access, telemetry, responses, conversations, files });
  const health = createHealthChecker(pool, { intervalMs: config.health.interval_ms, timeoutMs: config.health.timeout_ms });
  await health.start();
  for (const m of pool.members) {
    if (!m.healthy) log.warn("backend not healthy at start", { backend: m.backend.id, url: m.backend.url, error: m.lastError });
  }
  let server: Server<unknown> | undefined;
  return {
    config,
    pool,
    router,
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
        // (file uploads may be larger: readBody holds every other route to server.max_body_bytes)
        maxRequestBodySize: Math.max(config.server.max_body_bytes * 2 + 1024, config.batches.max_file_bytes + 64 * 1024),
        fetch: ttftMarksOn ? (req, s) => (ttftBegin(), app.fetch(req, s)) : (req, s) => app.fetch(req, s),
      });
      log.info("listening", { url: `http://${server.hostname}:${server.port}`, policy: policy.name, backends: pool.members.length });
      return server;
    },
    async stop() {
      // No new connections; requests in flight (streams too) get server.shutdown_grace_s to finish, backends and
      // health checks still up meanwhile; then whatever is left is closed.
      if (server) {
        const s = server;
        void s.stop(false);
        const deadline = performance.now() + config.server.shutdown_grace_s * 1000;
        if (s.pendingRequests > 0) log.info("waiting for requests in flight", { requests: s.pendingRequests, grace_s: config.server.shutdown_grace_s });
        while (s.pendingRequests > 0 && performance.now() < deadline) await Bun.sleep(50);
        if (s.pendingRequests > 0) log.warn("closing requests still in flight after the shutdown grace", { requests: s.pendingRequests });
        await s.stop(true);
      }
      // running batches are cancelled (what finished is written), then the files go
      await app.close();
      await files.close();
      health.stop();
      discovery?.stop();
      await router.stop();
      redis?.disconnect();
      log.flush();
    },
  };
}

/**
 * The request router for `routing.policy`: the stateless baselines over the
 * pool, anything else through the aware router, sharing its routing state
 * with the other replicas through Redis when `redis.url` is set.
 */
function createGatewayRouter(config: GatewayConfig, pool: BackendPool, log: Logger, rand?: () => number, replicaId?: string): RequestRouter {
  const name = config.routing.policy;
  if (isBaselinePolicy(name)) return createBaselineRouter(pool, createPolicy(name), rand);
  // Redis is an optimisation (routing goes on with this replica's view): a failed or late call logs at most once a minute.
  let lastWarn = Number.NEGATIVE_INFINITY;
  const shared = config.redis.url
    ? createRedisSharedState({
        url: config.redis.url,
        // Unique per replica: remote updates are namespaced by it, so request ids never collide.
        replicaId: replicaId || process.env.POD_NAME || `${hostname()}-${process.pid}`,
        onError: (err) => {
          if (performance.now() - lastWarn < 60_000) return;
          lastWarn = performance.now();
          log.warn("shared routing state: a Redis call failed or was late (routing continues on this replica's view)", { error: String((err as Error)?.message ?? err) });
        },
      })
    : undefined;
  return createAwareRouter({ pool, policy: name, log, shared, rand, dispatch: { affinitySlackMs: config.routing.affinity_slack_ms } });
}

/** `responses.store`: auto is Redis when there is one (every replica sees every response), else memory. */
function createResponseStore(config: GatewayConfig, redis: Redis | undefined): ResponseStore | undefined {
  const { store, max_entries, max_bytes, ttl_s } = config.responses;
  if (store === "off") return undefined;
  if (store === "redis" && !redis) throw new Error("config.responses.store redis needs config.redis.url");
  return redis && store !== "memory" ? createRedisStore(redis, { ttlS: ttl_s }) : createMemoryStore({ maxEntries: max_entries, maxBytes: max_bytes, ttlS: ttl_s });
}

/** One Redis client for limits and keys; logs when it goes down and comes back, not every retry. */
function connectRedis(url: string, log: Logger): Redis {
  const redis = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  let down = false;
  redis.on("error", (err: Error) => {
    if (!down) log.warn("redis unavailable: rate limits are per replica until it returns", { error: err.message });
    down = true;
  });
  redis.on("ready", () => {
    if (down) log.info("redis available again");
    down = false;
  });
  return redis;
}

/** Kubernetes discovery (discovery.mode kubernetes): EndpointSlices become pool members as they come and go. */
async function startDiscovery(config: GatewayConfig, pool: BackendPool, log: Logger, onError: (source: string) => void): Promise<Discovery | undefined> {
  if (config.discovery.mode !== "kubernetes") return undefined;
  const d = createDiscovery(
    {
      mode: "kubernetes",
      namespace: config.discovery.namespace || undefined,
      labelSelector: config.discovery.label_selector,
      portName: config.discovery.port_name,
      apiServer: config.discovery.api_server || undefined,
    },
    {
      onError: (source, err) => {
        onError(source);
        log.warn("discovery error", { source, error: err.message });
      },
    },
  );
  let known: DiscoveredBackend[] = [];
  d.onChange((list) => {
    const { added, removed } = diffBackends(known, list);
    known = list;
    for (const id of removed) pool.remove(id);
    for (const b of added) {
      pool.add(b.kind === "dispatch" ? createDispatchBackend({ id: b.id, url: b.url, protocol: "connect", connectTimeoutMs: config.upstream.connect_timeout_ms, reasoning: config.server.reasoning_parser !== "off" }) : createOpenAIBackend({ id: b.id, url: b.url, models: [] }));
    }
    if (added.length || removed.length) log.info("discovered backends changed", { added: added.map((b) => b.id), removed, total: list.length });
  });
  // The first list normally takes milliseconds; an unreachable API server must not block the start.
  await Promise.race([d.start(), Bun.sleep(10_000)]);
  return d;
}
