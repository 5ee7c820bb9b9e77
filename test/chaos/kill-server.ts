/**
 * Scenario: SIGKILL (or SIGTERM) one of N model servers while streaming load flows through
 * the gateway, then restart it on the same port. Measures what clients saw,
 * how long the gateway took to eject the dead server, and how long to take it
 * back. Shared by the quick CI test and the full chaos run.
 *
 * @example
 * const r = await killServerScenario({ servers: 4, concurrency: 8, loadMs: 4000 });
 * expect(r.tally.byKind["http-error"] ?? 0).toBe(0);
 */
import { startCluster } from "../support/cluster";
import { chatBody, runLoad, type Tally, tally } from "../support/load";
import { scrapeMetrics, sumOf } from "../support/metrics";
import { waitFor } from "../support/ports";
import type { ChatOutcome } from "../support/sse-client";

export interface KillReport {
  tally: Tally;
  outcomes: ChatOutcome[];
  /** ms from SIGKILL until /readyz showed the server unhealthy (Infinity: never). */
  ejectMs: number;
  /** ms from the restarted server's ready line until /readyz showed it healthy. */
  returnMs: number;
  /** Generate calls the restarted server served after it came back. */
  servedAfterReturn: number;
  /** Streams in flight when the server died that ended with an SSE error event. */
  streamErrors: ChatOutcome[];
}

export async function killServerScenario(o: {
  servers: number;
  concurrency: number;
  loadMs: number;
  maxTokens?: number;
  gatewayEnv?: Record<string, string>;
  /** SIGKILL (a crash, default) or SIGTERM (a rolling restart: the server drains and exits). */
  signal?: "SIGKILL" | "SIGTERM";
}): Promise<KillReport> {
  const c = await startCluster({ servers: o.servers, gatewayEnv: o.gatewayEnv });
  try {
    const victim = c.servers[0]!;
    const victimId = "dispatch-0";
    const healthyNow = async () => (await c.gateway.readyz()).backends.find((b) => b.id === victimId)?.healthy;
    let killedAt = 0;
    let ejectMs = Number.POSITIVE_INFINITY;
    let returnMs = Number.POSITIVE_INFINITY;
    let servedAfterReturn = 0;
    const chaos = (async () => {
      await Bun.sleep(o.loadMs / 4);
      killedAt = performance.now();
      if (o.signal === "SIGTERM") await victim.stop();
      else await victim.kill();
      if (await waitFor(async () => (await healthyNow()) === false, 5000, 10)) ejectMs = performance.now() - killedAt;
      await Bun.sleep(o.loadMs / 4);
      await victim.restart();
      const back = performance.now();
      if (await waitFor(async () => (await healthyNow()) === true, 5000, 10)) returnMs = performance.now() - back;
    })();
    const outcomes = await runLoad({
      baseUrl: c.gateway.url,
      concurrency: o.concurrency,
      durationMs: o.loadMs,
      maxRequests: 5000,
      body: (n) => chatBody(c.model, n, o.maxTokens ?? 24),
      chatOptions: { stallMs: 5000 },
    });
    await chaos;
    // The restarted server must be back in rotation: send a burst and see it serve some.
    const before = sumOf(await scrapeMetrics(victim.url), "dispatch_ms_requests_total");
    const burst = await runLoad({ baseUrl: c.gateway.url, concurrency: o.servers * 2, durationMs: 5000, maxRequests: o.servers * 6, body: (n) => chatBody(c.model, n, 4) });
    outcomes.push(...burst);
    servedAfterReturn = sumOf(await scrapeMetrics(victim.url), "dispatch_ms_requests_total") - before;
    return { tally: tally(outcomes), outcomes, ejectMs, returnMs, servedAfterReturn, streamErrors: outcomes.filter((x) => x.kind === "sse-error") };
  } finally {
    await c.stop();
  }
}
