/**
 * dispatch's routing policy: send each request where it is expected to get
 * its first token soonest, counting what is cached there and what is queued
 * there in the same unit (milliseconds), plus the extra prefill it makes the
 * fleet do and two smaller pressures. The backend with the lowest cost wins.
 *
 *   cost(b) = ttft(b) + miss(b) + decodePressure(b) + kvPressure(b)
 *
 *   ttft(b)  = W / P  +  ceil(W / C) * step(b)
 *     W      = queued(b) + uncached(b)     prefill tokens ahead of and including ours
 *     queued = reported queued prefill tokens + tokens routed since the report
 *     uncached = promptTokens - matchedBlocks * blockSize
 *     P      = the backend's measured prefill rate (tokens/s), else the median of the
 *              candidates' measured rates (a server that has not prefilled yet, e.g. just
 *              added, is most likely as fast as its peers serving the same model), else
 *              `prefillTokensPerS`
 *     C      = `chunkTokens`, prefill tokens the engine runs per iteration;
 *              each iteration also runs one decode step for the running batch
 *     step(b)= 1000 / measured decode steps/s, else stepBaseMs + stepPerSeqMs * running
 *
 *   matchedBlocks comes from the router's prefix index: blocks the server
 *   reported stored, plus blocks routed there and not yet reported
 *   (*pending*, router.ts: `index.pendingTtlMs`, on by default for this
 *   policy), except on a prefix hotter than one backend's share of the
 *   traffic. So a burst on a new prefix waits for the copy being computed
 *   (its TTFT counts that prefill as queued work ahead of it) instead of
 *   scattering cold prefills, while a prefix every request shares (a system
 *   prompt) spreads on the miss term below.
 *
 *   miss(b)  = missWeight * uncached / P / (1 + r(b) * replicationHorizonS)
 *     our prefill counted once more, as the delay it imposes on the requests
 *     queued behind us at b, discounted when the prefix b lacks is hot:
 *     r(b) = fleet-wide requests/s through the first prompt block b lacks
 *     and another backend holds (`missedPrefixRate`); a copy of a hot prefix
 *     on b will serve its share of that traffic, so recomputing it is cheap
 *     per future request and the prefix should spread rather than pile up.
 *
 *   decodePressure(b) = decodeWeight * expectedOutputTokens * step(b)
 *     our own decode time there, discounted: TTFT is the target, but a
 *     backend with a big decode batch also makes every later token slower.
 *
 *   kvPressure(b) = kvPenaltyMs * max(0, u - kvSoftLimit) / (1 - kvSoftLimit)
 *                 + evictWeight * evicted(b) * blockSize / P
 *     u = (pinned blocks + pending blocks + blocks we need) / total blocks.
 *     Past the soft limit the engine starts evicting reusable prefixes and
 *     then queues for memory, which the TTFT term does not see.
 *     evicted(b) = max(0, blocks we need - free blocks), free = total -
 *     max(pinned, blocks the index holds there): the cached blocks our
 *     request would push out, charged part of their recompute. Without it,
 *     among idle backends the one measured fastest takes every new prefix
 *     and thrashes its cache while the others sit empty.
 *
 * Constants (defaults; every one can be overridden):
 * - prefillTokensPerS 10,000: fallback prefill rate when a backend reports
 *   none (foreign backends, a server that has not prefilled yet).
 * - chunkTokens 2,048: chunked-prefill budget per engine iteration
 *   (vLLM's default max_num_batched_tokens for chunked prefill is of this order).
 * - stepBaseMs 5, stepPerSeqMs 0.25: fallback decode step time, a fixed cost
 *   per iteration (weights read) plus a per-sequence cost (attention, sampling).
 * - decodeWeight 0.02: 1 s of our own decode time weighs as 20 ms of TTFT.
 * - expectedOutputTokens 256: used when the request gives no `expectedOutputTokens`.
 * - kvSoftLimit 0.85, kvPenaltyMs 500: the KV penalty starts at 85% use and
 *   reaches 500 ms when the cache would be exactly full.
 * - evictWeight 0.5: an evicted cached block is charged half its
 *   recompute time (some of what LRU evicts is never asked for again). In
 *   the real check (4 CPU servers, docs/routing.md) 0 put 104 of 128
 *   requests on the server that measured fastest (hit 0.36-0.43 vs 0.66
 *   simulated) and 0.5 spread them (0.74 vs 0.78); in the simulator 0.25 to
 *   1 moved no target by more than 2 ms except multi-turn without keys at
 *   50% load (p99 103 -> 87-89 ms).
 * - affinitySlackMs 20: a request with an affinity key stays on the backend
 *   its key last went to unless another backend is more than this much
 *   cheaper (about one turn's new prefill, 200 tokens). It keeps sessions
 *   together where the index has lost their blocks (approximate TTL,
 *   expiry): then every backend costs about the same and any positive slack
 *   decides. A larger slack only overrides real load differences: 50 ms gave
 *   multi-turn p99 115 ms at 50% load vs the oracle's 101 (3 seeds), 20 ms 96.
 * - missWeight 2: so a backend holding a (cold) prefix keeps the request
 *   until its queue is about three prefills deeper than the alternative's:
 *   our recompute delays the requests queued behind us *and* leaves the
 *   prefix's later requests split between two copies. Load-only greed
 *   (missWeight 0, what the oracle does) recomputes shared prefixes and
 *   loses at high load. In the simulator (6 seeds, shared prefix, 95% load)
 *   missWeight 1 gave p99 510 ms and 2 gave 483 ms; multi-turn and Zipf
 *   moved by at most a few ms (docs/routing.md, "What closed the miss").
 * - replicationHorizonS 1: a missing prefix requested r times per second
 *   across the fleet has its miss term divided by 1 + r, i.e. amortised over
 *   about a second of its traffic. A 16-request group prompt barely moves;
 *   a system prompt on every request spreads to every backend.
 * - newSessionMissWeight 0: the first request of a session (an affinity key
 *   with no backend yet) decides where all its later turns will find their
 *   history, so it is placed on TTFT alone; following a hot shared prefix
 *   there would pile whole sessions onto one backend.
 * These were set from the engine model, then checked in the simulator
 * (bench/routing, docs/routing.md), not fitted per workload.
 *
 * @example
 * const policy = createDispatchCostPolicy({ prefillTokensPerS: 20_000 });
 * policy.choose(req, backends, rand); // { backendId, reason: "cost", matchedBlocks }
 */
import { argMin, decide, queuedPrefillTokens } from "./load-score";
import type { BackendView, RouteRequest, RoutingPolicy } from "./policy";

export interface DispatchCostOptions {
  prefillTokensPerS?: number;
  chunkTokens?: number;
  stepBaseMs?: number;
  stepPerSeqMs?: number;
  decodeWeight?: number;
  expectedOutputTokens?: number;
  kvSoftLimit?: number;
  kvPenaltyMs?: number;
  affinitySlackMs?: number;
  missWeight?: number;
  newSessionMissWeight?: number;
  replicationHorizonS?: number;
  evictWeight?: number;
}

export interface CostBreakdown {
  ttftMs: number;
  missMs: number;
  decodeMs: number;
  kvMs: number;
  total: number;
}

export type CostModel = Required<DispatchCostOptions>;

export const DEFAULT_COST_MODEL: CostModel = {
  prefillTokensPerS: 10_000,
  chunkTokens: 2048,
  stepBaseMs: 5,
  stepPerSeqMs: 0.25,
  decodeWeight: 0.02,
  expectedOutputTokens: 256,
  kvSoftLimit: 0.85,
  kvPenaltyMs: 500,
  affinitySlackMs: 20,
  missWeight: 2,
  newSessionMissWeight: 0,
  replicationHorizonS: 1,
  evictWeight: 0.5,
};

/**
 * The cost of sending `req` to `b`, in milliseconds, with its parts. `peerPrefillTokensPerS`: the
 * prefill rate to assume when `b` has measured none (peerPrefillRate over the candidates).
 */
export function estimateCost(req: RouteRequest, b: BackendView, m: CostModel, peerPrefillTokensPerS?: number): CostBreakdown {
  const matchedTokens = Math.min(req.promptTokens, (b.matchedBlocks ?? 0) * req.blockSize);
  const uncached = req.promptTokens - matchedTokens;
  const work = queuedPrefillTokens(b) + uncached;
  const rate = b.load?.prefillTokensPerS || peerPrefillTokensPerS || m.prefillTokensPerS;
  const running = b.load ? Math.max(b.load.running, b.outstanding - (b.pendingRequests ?? 0)) : b.outstanding;
  const step = b.load?.decodeStepsPerS ? 1000 / b.load.decodeStepsPerS : m.stepBaseMs + m.stepPerSeqMs * running;
  const ttftMs = (work / rate) * 1000 + Math.ceil(work / m.chunkTokens) * step;
  const replicate = 1 / (1 + (b.missedPrefixRate ?? 0) * m.replicationHorizonS);
  const missMs = m.missWeight * replicate * (uncached / rate) * 1000;

  const out = req.expectedOutputTokens ?? m.expectedOutputTokens;
  const decodeMs = m.decodeWeight * out * step;

  let kvMs = 0;
  const total = b.load?.kvBlocksTotal ?? 0;
  if (total > 0) {
    const pendingBlocks = (b.pendingPrefillTokens ?? 0) / req.blockSize;
    const need = Math.ceil((uncached + out) / req.blockSize);
    const u = (b.load!.kvBlocksUsed + pendingBlocks + need) / total;
    kvMs = (m.kvPenaltyMs * Math.max(0, u - m.kvSoftLimit)) / (1 - m.kvSoftLimit);
    const free = total - Math.max(b.load!.kvBlocksUsed, b.cachedBlocks ?? 0);
    kvMs += (m.evictWeight * Math.max(0, need - free) * req.blockSize * 1000) / rate;
  }
  return { ttftMs, missMs, decodeMs, kvMs, total: ttftMs + missMs + decodeMs + kvMs };
}

/**
 * The median measured prefill rate among `backends` (undefined when none has measured one). Without
 * it a backend with no measurement yet would be priced at the fixed fallback: on slow (CPU) servers
 * that made an idle, never-measured server look several times faster than the peer holding the
 * prompt's prefix, and the prefix lost (routing-e2e, a fresh-clone CI run on 2026-11-30).
 */
export function peerPrefillRate(backends: readonly BackendView[]): number | undefined {
  const rates = backends.map((b) => b.load?.prefillTokensPerS ?? 0).filter((r) => r > 0).sort((x, y) => x - y);
  if (rates.length === 0) return undefined;
  const mid = rates.length >> 1;
  return rates.length % 2 ? rates[mid]! : (rates[mid - 1]! + rates[mid]!) / 2;
}

export function createDispatchCostPolicy(options: DispatchCostOptions = {}): RoutingPolicy {
  const m: CostModel = { ...DEFAULT_COST_MODEL, ...stripUndefined(options) };
  if (!(m.prefillTokensPerS > 0) || !(m.chunkTokens > 0)) throw new RangeError("prefillTokensPerS and chunkTokens must be > 0");
  if (!(m.kvSoftLimit >= 0 && m.kvSoftLimit < 1)) throw new RangeError("kvSoftLimit must be in [0, 1)");
  return {
    name: "dispatch",
    choose(req, backends, rand) {
      // A session's first request decides where all its later turns will find their history.
      const fresh = req.affinityKey !== undefined && !backends.some((b) => b.affine);
      const model = fresh ? { ...m, missWeight: m.newSessionMissWeight } : m;
      const peer = peerPrefillRate(backends);
      const costs = backends.map((b) => estimateCost(req, b, model, peer).total);
      const best = argMin(costs, rand);
      if (req.affinityKey) {
        const affine = backends.findIndex((b) => b.affine);
        if (affine >= 0 && affine !== best && costs[affine]! <= costs[best]! + m.affinitySlackMs) {
          return decide(backends[affine]!, "affinity");
        }
      }
      return decide(backends[best]!, "cost");
    },
  };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
