/**
 * Small shared readings of a BackendView, so every policy means the same thing
 * by "queue" and "load" and no baseline is handicapped by a weaker reading.
 */
import type { BackendView, RouteDecision } from "./policy";

/** Requests queued at the backend: its reported waiting queue plus requests routed since. */
export function queueDepth(b: BackendView): number {
  return (b.load?.waiting ?? 0) + (b.pendingRequests ?? 0);
}

/**
 * Requests at the backend (running + waiting). The report can be stale and
 * `outstanding` (our own in-flight requests) is always fresh, so take the larger.
 */
export function requestLoad(b: BackendView): number {
  if (!b.load) return b.outstanding;
  return Math.max(b.load.running + b.load.waiting + (b.pendingRequests ?? 0), b.outstanding);
}

/** Prompt tokens waiting for prefill at the backend, reported plus routed since. */
export function queuedPrefillTokens(b: BackendView): number {
  return (b.load?.queuedPrefillTokens ?? 0) + (b.pendingPrefillTokens ?? 0);
}

/** KV blocks in use as a fraction of the total; 0 when unknown. */
export function kvUsage(b: BackendView): number {
  const l = b.load;
  if (!l || l.kvBlocksTotal <= 0) return 0;
  return Math.min(1, l.kvBlocksUsed / l.kvBlocksTotal);
}

/**
 * Index of the smallest `score` (ties broken uniformly with `rand`), so
 * deterministic tests can still exercise tie-breaking.
 */
export function argMin(scores: readonly number[], rand: () => number, eps = 1e-9): number {
  let best = Number.POSITIVE_INFINITY;
  for (const s of scores) if (s < best) best = s;
  const ties: number[] = [];
  scores.forEach((s, i) => {
    if (s <= best + eps) ties.push(i);
  });
  if (ties.length === 1) return ties[0]!;
  return ties[Math.min(ties.length - 1, Math.floor(rand() * ties.length))]!;
}

/** A decision for backend `b` that carries its match count. */
export function decide(b: BackendView, reason: string): RouteDecision {
  return { backendId: b.id, reason, matchedBlocks: b.matchedBlocks ?? 0 };
}
