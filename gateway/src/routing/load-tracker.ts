/**
 * Load per backend, from two sources merged into one view:
 * - the server's own load reports (`WatchLoad`), or a metrics scrape for
 *   foreign backends: authoritative but up to one report interval old;
 * - requests routed since (by this gateway, or by every replica when state is
 *   shared): fresh but only an estimate of their prefill work.
 *
 * A routed request counts as *pending* prefill work until the server can be
 * assumed to include it in its reports: when a report arrives more than
 * `ackLagMs` after the request was routed, or when its first token comes back.
 * Without this, every request routed between two reports sees the same stale
 * queue and they all herd onto the same backend.
 *
 * Pure bookkeeping: time comes in as `now` (ms).
 *
 * @example
 * const t = createLoadTracker();
 * t.onRouted("r1", "a", 2048, now);
 * t.view("a").pendingPrefillTokens; // 2048
 */

/**
 * One load report. Structurally the generated `dispatch.v1.LoadReport`
 * (uint64 fields arrive as bigint), so the RPC layer can pass it as is.
 * `kvBlocksUsed` counts blocks pinned by sequences, not reclaimable cache.
 */
export interface LoadSnapshot {
  running: number;
  waiting: number;
  queuedPrefillTokens: number | bigint;
  kvBlocksUsed: number;
  kvBlocksTotal: number;
  prefillTokensPerS?: number;
  decodeStepsPerS?: number;
}

export interface LoadView {
  outstanding: number;
  pendingPrefillTokens: number;
  pendingRequests: number;
  load?: {
    running: number;
    waiting: number;
    queuedPrefillTokens: number;
    kvBlocksUsed: number;
    kvBlocksTotal: number;
    prefillTokensPerS?: number;
    decodeStepsPerS?: number;
  };
}

export interface LoadTrackerOptions {
  /** A report received this long after a request was routed includes it. Default 20 ms. */
  ackLagMs?: number;
  /** In-flight entries older than this are dropped by `prune` (a replica that died mid-request). Default 15 min. */
  maxInFlightMs?: number;
}

export interface LoadTracker {
  onLoad(backendId: string, report: LoadSnapshot, now: number): void;
  onRouted(requestId: string, backendId: string, prefillTokens: number, now: number): void;
  /** The request's prefill is done: its work is no longer pending. */
  onFirstToken(requestId: string): void;
  onFinished(requestId: string): void;
  view(backendId: string): LoadView;
  removeBackend(backendId: string): void;
  prune(now: number): void;
}

interface InFlight {
  backendId: string;
  prefillTokens: number;
  routedAt: number;
  pending: boolean;
}

interface Backend {
  report?: LoadView["load"];
  inFlight: Set<string>;
  outstanding: number;
  pendingTokens: number;
  pendingCount: number;
}

export function createLoadTracker(options: LoadTrackerOptions = {}): LoadTracker {
  const ackLag = options.ackLagMs ?? 20;
  const maxAge = options.maxInFlightMs ?? 900_000;
  const backends = new Map<string, Backend>();
  const requests = new Map<string, InFlight>();

  function backend(id: string): Backend {
    let b = backends.get(id);
    if (!b) {
      b = { inFlight: new Set(), outstanding: 0, pendingTokens: 0, pendingCount: 0 };
      backends.set(id, b);
    }
    return b;
  }

  function settle(r: InFlight, b: Backend | undefined): void {
    if (!r.pending) return;
    r.pending = false;
    if (!b) return;
    b.pendingTokens -= r.prefillTokens;
    b.pendingCount -= 1;
  }

  function finish(id: string): void {
    const r = requests.get(id);
    if (!r) return;
    requests.delete(id);
    const b = backends.get(r.backendId);
    settle(r, b);
    if (!b) return;
    b.inFlight.delete(id);
    b.outstanding -= 1;
  }

  return {
    onLoad(id, report, now) {
      const b = backend(id);
      b.report = {
        running: report.running,
        waiting: report.waiting,
        queuedPrefillTokens: Number(report.queuedPrefillTokens),
        kvBlocksUsed: report.kvBlocksUsed,
        kvBlocksTotal: report.kvBlocksTotal,
        prefillTokensPerS: report.prefillTokensPerS || undefined,
        decodeStepsPerS: report.decodeStepsPerS || undefined,
      };
      for (const rid of b.inFlight) {
        const r = requests.get(rid)!;
        if (r.pending && now - r.routedAt >= ackLag) settle(r, b);
      }
    },
    onRouted(id, backendId, prefillTokens, now) {
      if (requests.has(id)) finish(id);
      const tokens = Math.max(0, prefillTokens);
      const b = backend(backendId);
      requests.set(id, { backendId, prefillTokens: tokens, routedAt: now, pending: true });
      b.inFlight.add(id);
      b.outstanding += 1;
      b.pendingTokens += tokens;
      b.pendingCount += 1;
    },
    onFirstToken(id) {
      const r = requests.get(id);
      if (r) settle(r, backends.get(r.backendId));
    },
    onFinished: finish,
    view(id) {
      const b = backends.get(id);
      if (!b) return { outstanding: 0, pendingPrefillTokens: 0, pendingRequests: 0 };
      return {
        outstanding: b.outstanding,
        pendingPrefillTokens: b.pendingTokens,
        pendingRequests: b.pendingCount,
        load: b.report,
      };
    },
    removeBackend(id) {
      const b = backends.get(id);
      if (!b) return;
      for (const rid of b.inFlight) requests.delete(rid);
      backends.delete(id);
    },
    prune(now) {
      for (const [id, r] of requests) if (now - r.routedAt > maxAge) finish(id);
    },
  };
}
