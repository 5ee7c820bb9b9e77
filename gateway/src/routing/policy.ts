/**
 * A routing policy is a pure function: a snapshot of the candidate backends in,
 * a choice out. No timers, no sockets, no randomness except through `rand`.
 * Implementations are siblings of this file, one per policy.
 */

/** What the router knows about one healthy backend at decision time. */
export interface BackendView {
  id: string;
  /** Requests this gateway (or all replicas, when shared) has in flight to it. */
  outstanding: number;
  /** From the server's load reports or metrics scrape, when known. */
  load?: {
    running: number;
    waiting: number;
    queuedPrefillTokens: number;
    kvBlocksUsed: number;
    kvBlocksTotal: number;
    /** Measured rates, when reported. */
    prefillTokensPerS?: number;
    decodeStepsPerS?: number;
  };
  /** Prompt blocks (leading, contiguous) this backend is believed to hold. */
  matchedBlocks?: number;
  /**
   * Prompt tokens routed here whose prefill the last load report cannot yet
   * include (routed after it), by this gateway or, when shared, by all replicas.
   * Policies add it to `load.queuedPrefillTokens`; absent means 0.
   */
  pendingPrefillTokens?: number;
  /** How many requests `pendingPrefillTokens` sums over; absent means 0. */
  pendingRequests?: number;
  /** Blocks the prefix index believes this backend holds in all (a cache-size view). */
  cachedBlocks?: number;
  /**
   * Recent fleet-wide requests per second through the first prompt block this
   * backend lacks but another candidate holds (0 when it lacks nothing others
   * hold). High: a hot prefix worth replicating here; low: one worth following.
   */
  missedPrefixRate?: number;
  /** True when the request's affinity key was last routed to this backend. */
  affine?: boolean;
}

/** The request being routed. */
export interface RouteRequest {
  /** Chained block hashes of the prompt's full blocks (see common/src/block-hash.ts). */
  blockHashes: bigint[];
  promptTokens: number;
  blockSize: number;
  /** Session affinity key (OpenAI `prompt_cache_key` or a header), when given. */
  affinityKey?: string;
  /** Output tokens expected (e.g. `max_tokens`, capped), for decode and KV pressure. */
  expectedOutputTokens?: number;
}

export interface RouteDecision {
  backendId: string;
  /** Why, for logs and traces (e.g. "prefix", "load", "affinity"). */
  reason: string;
  matchedBlocks?: number;
}

export interface RoutingPolicy {
  readonly name: string;
  /**
   * Choose among `backends` (never empty; all healthy). `rand` returns [0, 1)
   * and is the only source of randomness, so tests and the simulator are deterministic.
   */
  choose(req: RouteRequest, backends: readonly BackendView[], rand: () => number): RouteDecision;
}
