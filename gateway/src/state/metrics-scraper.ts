/**
 * Periodic scrape of a foreign backend's Prometheus endpoint into the router
 * (`router.onLoad`). Each scrape has a timeout; a failed or unparseable
 * scrape is reported and skipped (the router keeps its last view plus its own
 * pending accounting), and scrapes never overlap.
 *
 * @example
 * const s = createMetricsScraper({ url: "http://10.0.0.5:8000/metrics", onLoad: (l) => router.onLoad(id, l) });
 * s.start(); ... s.stop();
 */
import type { LoadSnapshot } from "../routing/load-tracker";
import { loadFromMetrics } from "./prometheus-load";

export interface MetricsScraperOptions {
  url: string;
  onLoad: (load: LoadSnapshot) => void;
  /** Default 250 ms. */
  intervalMs?: number;
  /** Default 200 ms. */
  timeoutMs?: number;
  onError?: (err: unknown) => void;
  fetch?: typeof fetch;
}

export interface MetricsScraper {
  start(): void;
  stop(): void;
  /** One scrape now; resolves true when a load was delivered. */
  scrapeOnce(): Promise<boolean>;
}

export function createMetricsScraper(o: MetricsScraperOptions): MetricsScraper {
  const interval = o.intervalMs ?? 250;
  const timeout = o.timeoutMs ?? 200;
  const doFetch = o.fetch ?? fetch;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running = false;

  async function scrapeOnce(): Promise<boolean> {
    try {
      const res = await doFetch(o.url, { signal: AbortSignal.timeout(timeout) });
      if (!res.ok) throw new Error(`metrics scrape ${o.url}: HTTP ${res.status}`);
      const load = loadFromMetrics(await res.text());
      if (!load) throw new Error(`metrics scrape ${o.url}: no vLLM or SGLang load gauges`);
      o.onLoad(load);
      return true;
    } catch (err) {
      o.onError?.(err);
      return false;
    }
  }

  function loop(): void {
    if (!running) return;
    void scrapeOnce().finally(() => {
      if (running) timer = setTimeout(loop, interval);
    });
  }

  return {
    start() {
      if (running) return;
      running = true;
      loop();
    },
    stop() {
      running = false;
      if (timer) clearTimeout(timer);
    },
    scrapeOnce,
  };
}
