/**
 * Scenario: two real model servers behind fault proxies; one proxy turns
 * faulty (hangs, is slow, answers 5xx, or drops streams mid-way) while load
 * flows, then turns healthy again. Reports what clients saw and what the
 * gateway's readiness said about the faulty backend.
 *
 * @example
 * const r = await faultyPeerScenario(cluster, { mode: "error" }, { concurrency: 4, loadMs: 2000 });
 */
import type { Cluster } from "../support/cluster";
import type { Fault } from "../support/fault-proxy";
import { chatBody, runLoad, type Tally, tally } from "../support/load";
import { waitFor } from "../support/ports";
import type { ChatOutcome } from "../support/sse-client";

export interface FaultReport {
  fault: Fault;
  tally: Tally;
  outcomes: ChatOutcome[];
  /** Whether /readyz showed the faulty backend unhealthy at some point during the fault. */
  ejected: boolean;
  /** Whether it was healthy again within 3 s after the fault ended. */
  returned: boolean;
  /** Requests the faulty proxy saw during the fault, by "mode method". */
  seen: Record<string, number>;
}

export async function faultyPeerScenario(c: Cluster, fault: Fault, o: { concurrency: number; loadMs: number; maxTokens?: number; stallMs?: number }): Promise<FaultReport> {
  const px = c.proxies[0]!;
  const id = "dispatch-0";
  px.counts.clear();
  px.setFault(fault);
  let ejected = false;
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const b = (await c.gateway.readyz().catch(() => undefined))?.backends.find((x) => x.id === id);
      if (b && !b.healthy) ejected = true;
      await Bun.sleep(20);
    }
  })();
  const outcomes = await runLoad({
    baseUrl: c.gateway.url,
    concurrency: o.concurrency,
    durationMs: o.loadMs,
    maxRequests: 2000,
    body: (n) => chatBody(c.model, n, o.maxTokens ?? 16),
    chatOptions: { stallMs: o.stallMs ?? 8000 },
  });
  polling = false;
  await poller;
  const seen = Object.fromEntries(px.counts);
  px.setFault({ mode: "pass" });
  const returned = await waitFor(async () => (await c.gateway.readyz()).backends.every((b) => b.healthy), 3000, 20);
  return { fault, tally: tally(outcomes), outcomes, ejected, returned, seen };
}
