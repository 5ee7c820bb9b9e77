/**
 * Scenarios beyond capacity. `burst` sends `concurrency` streams at once and
 * samples the model servers' resident memory while they run; the caller
 * configures where the limit sits (the gateway's max_in_flight, or the model
 * server's --max-num-seqs/--max-queue, or a tiny --kv-blocks).
 *
 * @example
 * const r = await burst(cluster, { concurrency: 24, maxTokens: 16 });
 * r.tally.byStatus["429"]; r.retryAfterMissing; r.peakRssKiB;
 */
import type { Cluster } from "../support/cluster";
import { runLoad, type Tally, tally } from "../support/load";
import { procStats } from "../support/proc-stats";
import type { ChatOutcome } from "../support/sse-client";

export interface BurstReport {
  tally: Tally;
  outcomes: ChatOutcome[];
  /** Refusals (429/503) that came without a Retry-After header. */
  retryAfterMissing: number;
  /** Highest model-server RSS seen during the burst, KiB, and the RSS before it. */
  peakRssKiB: number;
  rssBeforeKiB: number;
}

export async function burst(
  c: Cluster,
  o: { concurrency: number; maxTokens: number; body?: (n: number) => Record<string, unknown>; rounds?: number; stallMs?: number },
): Promise<BurstReport> {
  const pids = c.servers.map((s) => s.process.pid);
  const rss = () => pids.reduce((a, p) => Math.max(a, procStats(p)?.rssKiB ?? 0), 0);
  const rssBeforeKiB = rss();
  let peakRssKiB = rssBeforeKiB;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peakRssKiB = Math.max(peakRssKiB, rss());
      await Bun.sleep(25);
    }
  })();
  const body =
    o.body ??
    ((n: number) => ({ model: c.model, messages: [{ role: "user", content: `burst ${n}: list some words` }], max_tokens: o.maxTokens, ignore_eos: true, stream: true }));
  const rounds = o.rounds ?? 1;
  // Each worker sends `rounds` requests back to back: the first round arrives all at once.
  const outcomes = await runLoad({ baseUrl: c.gateway.url, concurrency: o.concurrency, durationMs: 60_000, maxRequests: o.concurrency * rounds, body, chatOptions: { stallMs: o.stallMs ?? 15_000 } });
  sampling = false;
  await sampler;
  const retryAfterMissing = outcomes.filter((x) => x.kind === "http-error" && (x.status === 429 || x.status === 503) && !x.retryAfter).length;
  return { tally: tally(outcomes), outcomes, retryAfterMissing, peakRssKiB, rssBeforeKiB };
}
