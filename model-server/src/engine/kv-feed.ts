/**
 * Fans the block manager's KV events out to watchers (routers). Each watcher
 * gets batches numbered 1, 2, 3...; a watcher that falls more than `maxBuffered`
 * batches behind loses batches, and the gap in its numbering tells it to
 * resubscribe with a snapshot. A subscription taken with `snapshot` starts with
 * the current cache contents, taken in the same tick, so nothing falls between.
 *
 * @example
 * const feed = createKvFeed({ snapshot: () => bm.snapshot() });
 * const sub = feed.subscribe({ snapshot: true });
 * feed.publish(bm.drainEvents());
 * for await (const batch of sub) console.log(batch.sequence, batch.events);
 */
import { createAsyncQueue } from "./async-queue";
import type { KvCacheEvent } from "./block-manager";

export interface KvBatch {
  sequence: number;
  events: KvCacheEvent[];
  snapshot: boolean;
  timestampMs: number;
}

export interface KvSubscription extends AsyncIterable<KvBatch> {
  close(): void;
}

export interface KvFeed {
  subscribe(opts: { snapshot: boolean }): KvSubscription;
  publish(events: KvCacheEvent[]): void;
  readonly subscribers: number;
  /** End every subscription (shutdown). */
  closeAll(): void;
}

export interface KvFeedOptions {
  snapshot: () => KvCacheEvent[];
  /** Events per snapshot batch. */
  snapshotBatchSize?: number;
  /** Batches a slow watcher may lag before batches are dropped. */
  maxBuffered?: number;
}

export function createKvFeed(opts: KvFeedOptions): KvFeed {
  const batchSize = opts.snapshotBatchSize ?? 256;
  const maxBuffered = opts.maxBuffered ?? 1024;
  const subs = new Set<{ push(b: Omit<KvBatch, "sequence">): void; close(): void }>();
  return {
    get subscribers() {
      return subs.size;
    },
    subscribe({ snapshot }) {
      const q = createAsyncQueue<KvBatch>();
      let seq = 0;
      const sub = {
        push(b: Omit<KvBatch, "sequence">) {
          seq++;
          if (q.size >= maxBuffered) return; // dropped: the watcher sees a gap
          q.push({ ...b, sequence: seq });
        },
        close() {
          subs.delete(sub);
          q.close();
        },
      };
      if (snapshot) {
        const events = opts.snapshot();
        const now = Date.now();
        // An empty cache still answers with one (empty) snapshot batch: the watcher knows it is in sync.
        if (events.length === 0) sub.push({ events: [], snapshot: true, timestampMs: now });
        for (let i = 0; i < events.length; i += batchSize) {
          sub.push({ events: events.slice(i, i + batchSize), snapshot: true, timestampMs: now });
        }
      }
      subs.add(sub);
      return { [Symbol.asyncIterator]: () => q[Symbol.asyncIterator](), close: sub.close };
    },
    publish(events) {
      if (events.length === 0 || subs.size === 0) return;
      const now = Date.now();
      for (const s of subs) s.push({ events, snapshot: false, timestampMs: now });
    },
    closeAll() {
      for (const s of [...subs]) s.close();
    },
  };
}
