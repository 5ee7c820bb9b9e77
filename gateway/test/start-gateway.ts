/**
 * Starts an in-process gateway on a free loopback port for tests, with its
 * log lines captured, and an official `openai` client pointed at it.
 */
import OpenAI from "openai";
import { validateConfig } from "../src/config/schema";
import { createGateway, type Gateway } from "../src/gateway";
import { createLogger } from "../src/log/logger";

export interface TestGateway {
  url: string;
  gw: Gateway;
  client: OpenAI;
  logs: string[];
  stop(): Promise<void>;
}

export async function startGateway(raw: Record<string, unknown>, apiKey = "test-key", o: { replicaId?: string } = {}): Promise<TestGateway> {
  // shutdown_grace_s 0: a test's stop() does not wait for streams it left open (shutdown.test.ts sets its own)
  const server = { host: "127.0.0.1", port: 0, shutdown_grace_s: 0, ...((raw.server as object) ?? {}) };
  const health = { interval_ms: 60_000, ...((raw.health as object) ?? {}) };
  const retry = { backoff_ms: 5, max_backoff_ms: 20, ...((raw.retry as object) ?? {}) };
  const config = validateConfig({ ...raw, server, health, retry });
  const logs: string[] = [];
  const log = createLogger({ level: config.logging.level, write: (t) => void logs.push(...t.trimEnd().split("\n")) });
  const gw = await createGateway(config, { log, replicaId: o.replicaId });
  const s = gw.listen();
  const url = `http://127.0.0.1:${s.port}`;
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0, timeout: 10_000 });
  return { url, gw, client, logs, stop: () => gw.stop() };
}
