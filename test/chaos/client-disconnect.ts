/**
 * Scenario: clients go away mid-stream; the model server must abort each
 * sequence and free its KV blocks quickly. Measured from the client's abort to
 * the server's own gauges (`dispatch_ms_kv_blocks_used`,
 * `dispatch_ms_running_sequences` back to their idle values), polled every few ms.
 *
 * @example
 * const r = await clientDisconnectScenario(cluster, { trials: 5 });
 * expect(Math.max(...r.freeMs)).toBeLessThan(100);
 */
import type { Cluster } from "../support/cluster";
import { scrapeMetrics, sumOf } from "../support/metrics";
import { chat } from "../support/sse-client";

export interface DisconnectReport {
  /** Per trial: ms from the client's abort until blocks and running sequences were back to idle. */
  freeMs: number[];
  /** KV blocks in use just before each abort (must be > 0 for the trial to mean anything). */
  usedBefore: number[];
  /** Increase of the server's cancelled-outcome counter over the run. */
  cancelled: number;
}

export async function clientDisconnectScenario(c: Cluster, o: { trials: number }): Promise<DisconnectReport> {
  const ms = c.servers[0]!;
  const cancelledNow = async () => sumOf(await scrapeMetrics(ms.url), "dispatch_ms_requests_total", 'outcome="cancelled"');
  const cancelled0 = await cancelledNow();
  const freeMs: number[] = [];
  const usedBefore: number[] = [];
  for (let t = 0; t < o.trials; t++) {
    let used = 0;
    const body = { model: c.model, messages: [{ role: "user", content: `trial ${t}: write a very long story about words` }], max_tokens: 400, ignore_eos: true, stream: true };
    // Abort after the 4th content chunk; read the gauges right before so the sequence is known to hold blocks.
    const r = await chat(c.gateway.url, body, {
      stallMs: 5000,
      abortAfterChunks: 4,
      onFirstChunk: () => {
        void scrapeMetrics(ms.url).then((m) => (used = m.get("dispatch_ms_kv_blocks_used") ?? 0));
      },
    });
    // chat() returns as soon as its abort lands, so this is the moment the client went away.
    const abortedAt = performance.now();
    if (r.kind !== "aborted") throw new Error(`trial ${t}: expected the client to abort mid-stream, got ${r.kind}`);
    let freedAt = Number.POSITIVE_INFINITY;
    const until = abortedAt + 2000;
    while (performance.now() < until) {
      const m = await scrapeMetrics(ms.url);
      if ((m.get("dispatch_ms_kv_blocks_used") ?? -1) === 0 && (m.get("dispatch_ms_running_sequences") ?? -1) === 0) {
        freedAt = performance.now();
        break;
      }
      await Bun.sleep(2);
    }
    freeMs.push(freedAt - abortedAt);
    usedBefore.push(used);
  }
  return { freeMs, usedBefore, cancelled: (await cancelledNow()) - cancelled0 };
}
