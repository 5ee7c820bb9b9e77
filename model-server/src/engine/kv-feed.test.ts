import { expect, test } from "bun:test";
import type { KvCacheEvent } from "./block-manager";
import { createKvFeed, type KvBatch, type KvSubscription } from "./kv-feed";

async function take(sub: KvSubscription, n: number): Promise<KvBatch[]> {
  const out: KvBatch[] = [];
  for await (const b of sub) {
    out.push(b);
    if (out.length === n) break;
  }
  return out;
}

test("snapshot first, then live batches numbered without gaps", async () => {
  const cached: KvCacheEvent[] = [
    { kind: "stored", hashes: [1n, 2n], parent: 0n },
    { kind: "stored", hashes: [3n], parent: 1n },
  ];
  const feed = createKvFeed({ snapshot: () => cached, snapshotBatchSize: 1 });
  const sub = feed.subscribe({ snapshot: true });
  feed.publish([{ kind: "evicted", hashes: [3n] }]);
  const got = await take(sub, 3);
  expect(got.map((b) => [b.sequence, b.snapshot, b.events]) as unknown[]).toEqual([
    [1, true, [cached[0]]],
    [2, true, [cached[1]]],
    [3, false, [{ kind: "evicted", hashes: [3n] }]],
  ]);
  sub.close();
  expect(feed.subscribers).toBe(0);
});

test("an empty cache snapshot is one empty snapshot batch; no snapshot asked, none sent", async () => {
  const feed = createKvFeed({ snapshot: () => [] });
  const a = feed.subscribe({ snapshot: true });
  const b = feed.subscribe({ snapshot: false });
  feed.publish([{ kind: "stored", hashes: [9n], parent: 0n }]);
  expect((await take(a, 2)).map((x) => [x.sequence, x.snapshot, x.events.length])).toEqual([
    [1, true, 0],
    [2, false, 1],
  ]);
  expect((await take(b, 1)).map((x) => x.sequence)).toEqual([1]);
});

test("a slow watcher loses batches and sees the gap", async () => {
  const feed = createKvFeed({ snapshot: () => [], maxBuffered: 2 });
  const sub = feed.subscribe({ snapshot: false });
  for (let i = 0; i < 5; i++) feed.publish([{ kind: "evicted", hashes: [BigInt(i)] }]);
  feed.closeAll();
  const seqs: number[] = [];
  for await (const b of sub) seqs.push(b.sequence);
  expect(seqs).toEqual([1, 2]);
  // The next one published after draining would be numbered 6: a gap from 2.
});
