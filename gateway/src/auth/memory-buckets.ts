/**
 * In-memory buckets: exact for one gateway replica, and the fallback when Redis
 * is absent or slow. Bounded: past `maxKeys` the least recently used key's
 * buckets are dropped (a dropped bucket is full again, i.e. fails open).
 *
 * @example
 * const store = createMemoryBuckets();
 * await store.apply("team-a", { requestsPerMinute: 60 }, 1, 0, "admit");
 */
import type { BucketOutcome, BucketStore, RateLimits } from "./bucket-store";
import { mapFront } from "@dispatch/common/src/map-front";
import { admissionNeed, refill, take, waitMs, type BucketState } from "./token-bucket";

export function createMemoryBuckets(opts: { now?: () => number; maxKeys?: number } = {}): BucketStore {
  const now = opts.now ?? Date.now;
  const maxKeys = opts.maxKeys ?? 100_000;
  const buckets = new Map<string, { req?: BucketState; tok?: BucketState }>();
  const front = mapFront(buckets);

  return {
    async apply(keyId: string, limits: RateLimits, requests: number, tokens: number, mode: "admit" | "charge"): Promise<BucketOutcome> {
      const t = now();
      const entry = buckets.get(keyId) ?? {};
      buckets.delete(keyId); // re-insert below: Map order is the LRU order
      const rc = limits.requestsPerMinute ?? 0;
      const tc = limits.tokensPerMinute ?? 0;
      const rl = rc > 0 ? refill(entry.req, rc, t) : undefined;
      const tl = tc > 0 ? refill(entry.tok, tc, t) : undefined;
      if (mode === "admit") {
        const rWait = rl === undefined ? 0 : waitMs(rl, admissionNeed(requests, rc), rc);
        const tWait = tl === undefined ? 0 : waitMs(tl, admissionNeed(tokens, tc), tc);
        if (rWait > 0 || tWait > 0) {
          buckets.set(keyId, entry);
          return { allowed: false, limitedBy: rWait >= tWait ? "requests" : "tokens", retryAfterMs: Math.max(rWait, tWait), requestsLeft: rl, tokensLeft: tl };
        }
      }
      const out: BucketOutcome = { allowed: true, retryAfterMs: 0 };
      if (rl !== undefined) {
        const level = mode === "admit" ? take(rl, requests, rc) : rl;
        entry.req = { tokens: level, updatedMs: t };
        out.requestsLeft = level;
      }
      if (tl !== undefined) {
        const level = take(tl, tokens, tc);
        entry.tok = { tokens: level, updatedMs: t };
        out.tokensLeft = level;
      }
      buckets.set(keyId, entry);
      while (buckets.size > maxKeys) front.shift();
      return out;
    },
  };
}
