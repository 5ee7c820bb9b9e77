/**
 * The long-lived feeds that keep the router's view of one backend current
 * while it is healthy:
 * - a dispatch model server: `WatchKvEvents` (with a snapshot, so each
 *   (re)subscription replaces the backend's index) and `WatchLoad`, each
 *   reconnecting with capped exponential backoff; a sequence gap
 *   resubscribes at once;
 * - an OpenAI-HTTP server (vLLM, SGLang): a Prometheus scrape of its
 *   `/metrics` into the load tracker.
 * `stop()` ends them (the backend was ejected or removed); a backend that
 * returns gets new ones.
 *
 * @example
 * const feeds = startBackendFeeds({ backend, router, log });
 * feeds.stop();
 */
import type { Logger } from "../log/logger";
import type { Router as RoutingCore } from "../routing/router";
import type { ModelClient } from "../rpc/model-client";
import { createMetricsScraper } from "../state/metrics-scraper";
import type { Backend } from "./backend";

export interface FeedOptions {
  backend: Backend;
  router: RoutingCore;
  log: Logger;
  /** WatchLoad interval asked of the server. Default 100 ms. */
  loadIntervalMs?: number;
  /** First reconnect delay; doubles up to `maxBackoffMs`. Default 100 ms. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** Metrics scrape interval for OpenAI-HTTP backends. Default 250 ms. */
  scrapeIntervalMs?: number;
  /**
   * A dispatch server's load stream failed (not stopped by us). The pool counts
   * it like a failed probe, so a dead server that gets no requests (routing
   * sends them elsewhere) is still ejected in a few hundred ms, not at the
   * next health probe.
   */
  onStreamError?: (err: Error) => void;
}

export interface BackendFeeds {
  stop(): void;
}

/** Sleep `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * Run `open` until `signal` aborts: after an error or an end, wait and run it
 * again (the wait resets once a run delivered something).
 */
async function keepOpen(
  name: string,
  o: FeedOptions,
  signal: AbortSignal,
  open: (delivered: () => void) => Promise<"resubscribe" | "ended">,
  onError?: (err: Error) => void,
): Promise<void> {
  const first = o.backoffMs ?? 100;
  const max = o.maxBackoffMs ?? 5000;
  let backoff = first;
  let failing = false;
  while (!signal.aborted) {
    let got = false;
    try {
      const r = await open(() => {
        got = true;
        if (failing) o.log.info(`${name} stream restored`, { backend: o.backend.id });
        failing = false;
      });
      if (r === "resubscribe") o.log.debug(`${name} stream had a gap: resubscribing`, { backend: o.backend.id });
    } catch (err) {
      if (signal.aborted) return;
      if (!failing) o.log.warn(`${name} stream failed: reconnecting`, { backend: o.backend.id, error: (err as Error).message });
      failing = true;
      onError?.(err as Error);
    }
    if (got) backoff = first;
    await pause(backoff, signal);
    backoff = Math.min(max, backoff * 2);
  }
}

function watchDispatch(client: ModelClient, o: FeedOptions, signal: AbortSignal): void {
  const id = o.backend.id;
  void keepOpen("kv events", o, signal, async (delivered) => {
    o.router.onKvStreamStart(id, true);
    for await (const batch of client.watchKvEvents(true, signal)) {
      delivered();
      if (o.router.onKvEvents(id, batch).resubscribe) return "resubscribe";
    }
    return "ended";
  });
  void keepOpen("load", o, signal, async (delivered) => {
    for await (const report of client.watchLoad(o.loadIntervalMs ?? 100, signal)) {
      delivered();
      o.router.onLoad(id, report);
    }
    return "ended";
  }, o.onStreamError);
}

/** `http://h:8000/v1` -> `http://h:8000/metrics` (vLLM and SGLang serve both at the root). */
export function defaultMetricsUrl(url: string): string {
  return `${url.replace(/\/+$/, "").replace(/\/v1$/, "")}/metrics`;
}

export function startBackendFeeds(o: FeedOptions): BackendFeeds {
  const ctl = new AbortController();
  const b = o.backend;
  const client = (b as Partial<{ client: ModelClient }>).client;
  if (b.kind === "dispatch" && client) {
    watchDispatch(client, o, ctl.signal);
    return { stop: () => ctl.abort() };
  }
  let failing = false;
  const scraper = createMetricsScraper({
    url: b.metricsUrl ?? defaultMetricsUrl(b.url),
    intervalMs: o.scrapeIntervalMs,
    onLoad: (load) => {
      if (failing) o.log.info("metrics scrape restored", { backend: b.id });
      failing = false;
      o.router.onLoad(b.id, load);
    },
    onError: (err) => {
      if (!failing) o.log.warn("metrics scrape failed: routing without this backend's load until it works", { backend: b.id, error: (err as Error).message });
      failing = true;
    },
  });
  scraper.start();
  return { stop: () => scraper.stop() };
}
