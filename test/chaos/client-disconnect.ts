/**
 * Scenario: clients go away mid-stream; the model server must abort each
 * sequence and free its KV blocks quickly. Read from the server's own load
 * reports (WatchLoad every 10 ms, each stamped with the server's clock): the
 * time from the client's abort to the first report with no KV blocks in use
 * and no running sequence. Scraping /metrics instead would add the scrape's
 * own latency to every figure. The cancelled-outcome counter on /metrics
 * confirms the server saw cancels, not completions.
 *
 * @example
 * const r = await clientDisconnectScenario(cluster, { trials: 5 });
 * expect(Math.max(...r.freeMs)).toBeLessThan(100);
 */
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { ModelService } from "@dispatch/proto/gen/dispatch/v1/model_service_pb";
import type { Cluster } from "../support/cluster";
import { scrapeMetrics, sumOf } from "../support/metrics";
import { chat } from "../support/sse-client";

export interface DisconnectReport {
  /** Per trial: ms from the client's abort to the server's first report with blocks and sequences back to 0. */
  freeMs: number[];
  /** Most KV blocks in use during each trial (must be > 0 for the trial to mean anything). */
  usedBefore: number[];
  /** Increase of the server's cancelled-outcome counter over the run. */
  cancelled: number;
}

interface Report {
  t: number;
  used: number;
  running: number;
}

export async function clientDisconnectScenario(c: Cluster, o: { trials: number }): Promise<DisconnectReport> {
  const ms = c.servers[0]!;
  const cancelledNow = async () => sumOf(await scrapeMetrics(ms.url), "dispatch_ms_requests_total", 'outcome="cancelled"');
  const cancelled0 = await cancelledNow();
  const reports: Report[] = [];
  const watch = new AbortController();
  const client = createClient(ModelService, createConnectTransport({ baseUrl: ms.url, useBinaryFormat: true }));
  const watching = (async () => {
    try {
      for await (const r of client.watchLoad({ intervalMs: 10 }, { signal: watch.signal })) {
        reports.push({ t: Number(r.timestampUnixMs), used: r.kvBlocksUsed, running: r.running });
      }
    } catch {
      // ended by watch.abort()
    }
  })();
  const freeMs: number[] = [];
  const usedBefore: number[] = [];
  try {
    for (let t = 0; t < o.trials; t++) {
      const startedAt = Date.now();
      const body = { model: c.model, messages: [{ role: "user", content: `trial ${t}: write a very long story about words` }], max_tokens: 400, ignore_eos: true, stream: true };
      const r = await chat(c.gateway.url, body, { stallMs: 5000, abortAfterChunks: 4 });
      // chat() returns as soon as its abort lands: this is the moment the client went away.
      const abortedAt = Date.now();
      if (r.kind !== "aborted") throw new Error(`trial ${t}: expected the client to abort mid-stream, got ${r.kind}`);
      let freed: Report | undefined;
      const until = Date.now() + 2000;
      while (!freed && Date.now() < until) {
        await Bun.sleep(10);
        freed = reports.find((x) => x.t >= abortedAt && x.used === 0 && x.running === 0);
      }
      freeMs.push(freed ? freed.t - abortedAt : Number.POSITIVE_INFINITY);
      usedBefore.push(Math.max(0, ...reports.filter((x) => x.t >= startedAt && x.t <= abortedAt).map((x) => x.used)));
    }
  } finally {
    watch.abort();
    await watching;
  }
  return { freeMs, usedBefore, cancelled: (await cancelledNow()) - cancelled0 };
}
