/**
 * Token-bucket arithmetic shared by the in-memory limiter and (mirrored line
 * for line) by the Redis Lua script in redis-buckets.ts. A bucket holds up to
 * `capacity` units and refills at `capacity` per minute. Admission needs
 * `min(cost, capacity)` units, so one request larger than the whole budget can
 * still run once the bucket is full; it then leaves the bucket in debt (down
 * to -capacity) and later requests wait for the refill.
 */
export interface BucketState {
  tokens: number;
  updatedMs: number;
}

const WINDOW_MS = 60_000;

/** The bucket's level at `nowMs`. A missing bucket is full. */
export function refill(state: BucketState | undefined, capacity: number, nowMs: number): number {
  if (!state) return capacity;
  const elapsed = Math.max(0, nowMs - state.updatedMs);
  return Math.min(capacity, state.tokens + (elapsed * capacity) / WINDOW_MS);
}

/** Milliseconds until `level` reaches `need` (0 when it already has). */
export function waitMs(level: number, need: number, capacity: number): number {
  if (level >= need) return 0;
  return Math.ceil(((need - level) * WINDOW_MS) / capacity);
}

/** Units a request must find in the bucket to be admitted. */
export const admissionNeed = (cost: number, capacity: number) => Math.min(cost, capacity);

/** Level after taking `cost`, floored at -capacity (bounded debt). */
export const take = (level: number, cost: number, capacity: number) => Math.max(-capacity, level - cost);
