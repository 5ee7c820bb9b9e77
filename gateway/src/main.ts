/**
 * The gateway's entry point.
 *
 *   bun gateway/src/main.ts [--config gateway.yaml] [--port N] [--host ADDR] [--backend kind=url ...]
 *
 * Defaults to 127.0.0.1:8080; `PORT` and `DISPATCH_*` variables override the
 * file (see docs/configuration.md). A bad configuration exits with status 2
 * and a message naming the key; an address it cannot listen on (port in use,
 * no permission) with status 1 and a log line saying which.
 */
import { ConfigError } from "./config/schema";
import { loadConfig } from "./config/load-config";
import { createGateway } from "./gateway";
import { describeListenError } from "@dispatch/common/src/listen-error";
import { startTracing } from "@dispatch/common/src/telemetry/start-tracing";

async function main(): Promise<void> {
  let loaded: ReturnType<typeof loadConfig>;
  let gw: Awaited<ReturnType<typeof createGateway>>;
  try {
    loaded = loadConfig({ argv: process.argv.slice(2), env: process.env });
    gw = await createGateway(loaded.config);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${JSON.stringify({ ts: new Date().toISOString(), level: "error", msg: "invalid configuration", error: err.message })}\n`);
      process.exit(2);
    }
    throw err;
  }
  for (const name of loaded.unknownEnv) gw.log.warn("unknown DISPATCH_ variable ignored", { name });
  // Off unless the standard OTEL_* variables ask for traces (docs/observability.md).
  const tracing = startTracing({ serviceName: "dispatch-gateway" });
  try {
    gw.listen();
  } catch (err) {
    const reason = describeListenError(err, gw.config.server.host, gw.config.server.port);
    if (!reason) throw err;
    gw.log.error("cannot listen", { host: gw.config.server.host, port: gw.config.server.port, error: reason });
    gw.log.flush();
    await tracing.shutdown().catch(() => {});
    process.exit(1);
  }
  // First signal: stop accepting, let requests in flight finish (server.shutdown_grace_s), then exit; a second
  // signal exits at once.
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      gw.log.warn("stopping now", { signal });
      gw.log.flush();
      process.exit(1);
    }
    stopping = true;
    gw.log.info("stopping", { signal, grace_s: gw.config.server.shutdown_grace_s });
    setTimeout(() => process.exit(0), (gw.config.server.shutdown_grace_s + 5) * 1000).unref();
    await gw.stop();
    await tracing.shutdown().catch(() => {});
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
}

await main();
