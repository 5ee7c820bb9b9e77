import { expect, test } from "bun:test";
import { createLogger } from "../log/logger";
import { createRouter } from "../routing/router";
import type { KvEventBatchView, LoadView, ModelClient } from "../rpc/model-client";
import type { Backend } from "./backend";
import { defaultMetricsUrl, startBackendFeeds } from "./backend-streams";

const log = createLogger({ level: "error", write: () => {} });
const batch = (sequence: number, hashes: bigint[], snapshot = false): KvEventBatchView => ({
  serverId: "s",
  sequence: BigInt(sequence),
  events: [{ kind: "stored", blockHashes: hashes, parentHash: 0n }],
  timestampUnixMs: 0,
  snapshot,
  blockSize: 16,
});

/** A client whose KV subscriptions follow a script: one list of batches (or an error) per subscription. */
function scriptedClient(script: (KvEventBatchView[] | Error)[], subscriptions: boolean[]): ModelClient {
  return {
    health: async () => ({ serving: true, message: "" }),
    modelInfo: async () => {
      throw new Error("unused");
    },
    generate: async function* () {},
    async *watchLoad(_ms: number, signal: AbortSignal): AsyncIterable<LoadView> {
      yield { serverId: "s", running: 3, waiting: 1, queuedPrefillTokens: 10, kvBlocksUsed: 1, kvBlocksTotal: 8, kvBlocksCached: 0, timestampUnixMs: 0, prefillTokensPerS: 0, decodeStepsPerS: 0, maxQueue: 0 };
      await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
    },
    async *watchKvEvents(snapshot: boolean, signal: AbortSignal) {
      subscriptions.push(snapshot);
      const step = script.shift();
      if (step instanceof Error) throw step;
      for (const b of step ?? []) yield b;
      // The last scripted subscription stays open until stopped.
      if (script.length === 0) await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
    },
  };
}

function backendWith(client: ModelClient): Backend {
  return { id: "ms", kind: "dispatch", url: "http://127.0.0.1:1", client, models: () => [], profile: () => undefined, probe: async () => {}, open: async () => Promise.reject(new Error("unused")) } as Backend;
}

async function until(ok: () => boolean, ms = 2000) {
  const end = Date.now() + ms;
  while (!ok() && Date.now() < end) await Bun.sleep(5);
}

test("a sequence gap resubscribes with a snapshot; a failed stream reconnects; stop ends both", async () => {
  const subs: boolean[] = [];
  const client = scriptedClient(
    [
      [batch(1, [1n], true), batch(3, [2n])], // 2 missing: resubscribe
      new Error("connection reset"), // reconnect after backoff
      [batch(1, [7n, 8n], true)],
    ],
    subs,
  );
  const router = createRouter({ policy: "dispatch", blockSize: 16 });
  router.addBackend("ms", "exact");
  const feeds = startBackendFeeds({ backend: backendWith(client), router, log, backoffMs: 5, maxBackoffMs: 20 });
  await until(() => subs.length === 3 && router.index.match([7n, 8n], ["ms"], Date.now())[0] === 2);
  expect(subs).toEqual([true, true, true]);
  // The last snapshot replaced what the first stream had stored.
  expect(router.index.match([7n, 8n], ["ms"], Date.now())).toEqual([2]);
  expect(router.index.match([1n], ["ms"], Date.now())).toEqual([0]);
  expect(router.views({ blockHashes: [], promptTokens: 1, blockSize: 16 })[0]!.load?.running).toBe(3);
  feeds.stop();
  await Bun.sleep(30);
  expect(subs.length).toBe(3);
});

test("OpenAI-HTTP backends: /metrics beside /v1 unless configured", () => {
  expect(defaultMetricsUrl("http://10.0.0.5:8000/v1")).toBe("http://10.0.0.5:8000/metrics");
  expect(defaultMetricsUrl("http://10.0.0.5:30000/")).toBe("http://10.0.0.5:30000/metrics");
});

test("a failing load stream is reported (the pool ejects a dead server without waiting for a probe); stop silences it", async () => {
  const errors: string[] = [];
  const client: ModelClient = {
    ...scriptedClient([[]], []),
    // biome-ignore lint/correctness/useYield: the stream fails before its first report
    async *watchLoad(): AsyncIterable<LoadView> {
      throw new Error("connect ECONNREFUSED");
    },
  };
  const router = createRouter({ policy: "dispatch", blockSize: 16 });
  router.addBackend("ms", "exact");
  const feeds = startBackendFeeds({ backend: backendWith(client), router, log, backoffMs: 5, maxBackoffMs: 5, onStreamError: (e) => errors.push(e.message) });
  await until(() => errors.length >= 2);
  expect(errors.slice(0, 2)).toEqual(["connect ECONNREFUSED", "connect ECONNREFUSED"]);
  feeds.stop();
  const seen = errors.length;
  await Bun.sleep(30);
  expect(errors.length).toBeLessThanOrEqual(seen + 1);
});
