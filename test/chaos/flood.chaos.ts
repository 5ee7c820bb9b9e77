/**
 * A flood at the model server's default limits (--max-queue 256,
 * --max-num-seqs 32) through a gateway without its own limit: every request
 * queues or is refused with 429 + Retry-After, the server's memory stays
 * bounded and it keeps serving.
 */
import { afterEach, expect, test } from "bun:test";
import { type Cluster, startCluster } from "../support/cluster";
import { scrapeMetrics } from "../support/metrics";
import { chat } from "../support/sse-client";
import { burst } from "./overload";

let c: Cluster | undefined;
afterEach(async () => {
  await c?.stop();
  c = undefined;
});

const MiB = 1024;

test("flood at the model server's defaults (--max-queue 256, --max-num-seqs 32): 600 streams at once queue or are refused; memory bounded; still serving", async () => {
  c = await startCluster({ servers: 1 });
  const cl = c;
  const body = (n: number) => ({ model: cl.model, messages: [{ role: "user", content: `flood ${n}: ${"many words in a longer prompt ".repeat(8)}` }], max_tokens: 4, ignore_eos: true, stream: true });
  // Queued requests get no byte until their first token: on a busy 2-core machine that can take tens of seconds.
  const r = await burst(cl, { concurrency: 600, maxTokens: 4, body, stallMs: 90_000 });
  const m = await scrapeMetrics(cl.servers[0]!.url);
  console.log(
    JSON.stringify({
      scenario: "flood-defaults",
      tally: r.tally,
      retryAfterMissing: r.retryAfterMissing,
      rssBeforeMiB: Math.round(r.rssBeforeKiB / MiB),
      peakRssMiB: Math.round(r.peakRssKiB / MiB),
      serverOutcomes: Object.fromEntries([...m].filter(([k]) => k.startsWith("dispatch_ms_requests_total"))),
    }),
  );
  expect((r.tally.byStatus["200"] ?? 0) + (r.tally.byStatus["429"] ?? 0)).toBe(r.tally.total);
  expect(r.tally.byKind.ok).toBe(r.tally.byStatus["200"]!);
  expect(r.retryAfterMissing).toBe(0);
  expect(r.peakRssKiB - r.rssBeforeKiB).toBeLessThan(512 * MiB);
  const after = await chat(cl.gateway.url, { model: cl.model, messages: [{ role: "user", content: "still there?" }], max_tokens: 4, stream: true });
  expect(after.kind).toBe("ok");
}, 150_000);
