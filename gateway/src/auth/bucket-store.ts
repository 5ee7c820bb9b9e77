/**
 * Where a key's two buckets (requests/min, tokens/min) live. Two
 * implementations: Redis (shared by every gateway replica, atomic in Lua) and
 * memory (one replica, the fallback). Both apply token-bucket.ts's rules.
 */
export interface RateLimits {
  /** 0 or absent = unlimited. */
  requestsPerMinute?: number;
  tokensPerMinute?: number;
}

export interface BucketOutcome {
  allowed: boolean;
  /** When refused: the bucket that refused and how long until it would admit. */
  limitedBy?: "requests" | "tokens";
  retryAfterMs: number;
  /** Levels after the operation (undefined for unlimited buckets). */
  requestsLeft?: number;
  tokensLeft?: number;
}

export interface BucketStore {
  /**
   * "admit": take `requests` and `tokens` from both buckets if both can afford
   * them (all or nothing). "charge": take `tokens` unconditionally (completion
   * tokens known only after the response).
   */
  apply(keyId: string, limits: RateLimits, requests: number, tokens: number, mode: "admit" | "charge"): Promise<BucketOutcome>;
}
