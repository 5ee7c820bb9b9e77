import { afterAll, expect, test } from "bun:test";
import type { LoadSnapshot } from "../routing/load-tracker";
import { createMetricsScraper } from "./metrics-scraper";

let mode: "ok" | "slow" | "500" | "junk" = "ok";
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch() {
    if (mode === "slow") await Bun.sleep(300);
    if (mode === "500") return new Response("boom", { status: 500 });
    if (mode === "junk") return new Response("hello\n");
    return new Response("vllm:num_requests_running 2\nvllm:num_requests_waiting 1\nvllm:kv_cache_usage_perc 0.1\n");
  },
});
afterAll(() => server.stop(true));
const url = `http://127.0.0.1:${server.port}/metrics`;

test("a scrape delivers the backend's load", async () => {
  mode = "ok";
  const got: LoadSnapshot[] = [];
  const s = createMetricsScraper({ url, onLoad: (l) => got.push(l) });
  expect(await s.scrapeOnce()).toBe(true);
  expect(got[0]).toMatchObject({ running: 2, waiting: 1, kvBlocksUsed: 100 });
});

test("slow, failing and unparseable scrapes are reported and skipped", async () => {
  const errors: unknown[] = [];
  const got: LoadSnapshot[] = [];
  const s = createMetricsScraper({ url, timeoutMs: 50, onLoad: (l) => got.push(l), onError: (e) => errors.push(e) });
  for (const m of ["slow", "500", "junk"] as const) {
    mode = m;
    const t0 = performance.now();
    expect(await s.scrapeOnce()).toBe(false);
    expect(performance.now() - t0).toBeLessThan(250);
  }
  expect(got).toHaveLength(0);
  expect(errors).toHaveLength(3);
});

test("the loop scrapes periodically until stopped", async () => {
  mode = "ok";
  let n = 0;
  const s = createMetricsScraper({ url, intervalMs: 10, onLoad: () => n++ });
  s.start();
  const until = Date.now() + 2000;
  while (n < 3 && Date.now() < until) await Bun.sleep(5);
  s.stop();
  expect(n).toBeGreaterThanOrEqual(3);
  const after = n;
  await Bun.sleep(50);
  expect(n - after).toBeLessThanOrEqual(1);
});
