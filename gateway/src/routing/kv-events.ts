/**
 * Applying a model server's KV event stream (`WatchKvEvents`) to the prefix
 * index, with the stream's two rules: a batch whose sequence is not the last
 * one plus one means events were lost (the caller must resubscribe with a
 * snapshot), and the first snapshot batch of a subscription replaces whatever
 * the index held for that backend.
 *
 * Two shapes are accepted so either layer can pass its messages straight
 * through: the generated `dispatch.v1.KvEventBatch` (`{ event: { case, value } }`)
 * and the gateway RPC client's view (`{ kind, blockHashes }`, rpc/model-client.ts).
 */
import type { PrefixIndex } from "./prefix-index";

export type KvEventLike =
  | { case: "stored"; value: { blockHashes: readonly bigint[]; parentHash?: bigint } }
  | { case: "evicted"; value: { blockHashes: readonly bigint[] } }
  | { case: "cleared"; value?: unknown }
  | { case: undefined; value?: undefined };

export type KvEventViewLike =
  | { kind: "stored"; blockHashes: readonly bigint[] }
  | { kind: "evicted"; blockHashes: readonly bigint[] }
  | { kind: "cleared" };

export interface KvEventBatchLike {
  sequence: bigint | number;
  events: ReadonlyArray<{ event: KvEventLike } | KvEventViewLike>;
  snapshot?: boolean;
}

function normalize(e: { event: KvEventLike } | KvEventViewLike): KvEventLike {
  if ("event" in e) return e.event;
  switch (e.kind) {
    case "stored":
      return { case: "stored", value: { blockHashes: e.blockHashes } };
    case "evicted":
      return { case: "evicted", value: { blockHashes: e.blockHashes } };
    default:
      return { case: "cleared" };
  }
}

export interface KvStreamState {
  lastSequence?: bigint;
  inSnapshot: boolean;
}

/**
 * Apply one batch. Returns `resubscribe: true` when a gap was detected; the
 * batch is still applied (its events are real), but the index may be missing
 * evictions until the snapshot arrives.
 */
export function applyKvBatch(
  index: PrefixIndex,
  backendId: string,
  state: KvStreamState,
  batch: KvEventBatchLike,
): { resubscribe: boolean } {
  const seq = BigInt(batch.sequence);
  let resubscribe = false;
  if (batch.snapshot && !state.inSnapshot) {
    index.clear(backendId);
    state.inSnapshot = true;
  } else if (state.lastSequence !== undefined && seq !== state.lastSequence + 1n) {
    resubscribe = true;
  }
  if (!batch.snapshot) state.inSnapshot = false;
  state.lastSequence = seq;
  for (const raw of batch.events) {
    const event = normalize(raw);
    switch (event.case) {
      case "stored":
        index.applyStored(backendId, event.value.blockHashes);
        break;
      case "evicted":
        index.applyEvicted(backendId, event.value.blockHashes);
        break;
      case "cleared":
        index.clear(backendId);
        break;
      default:
        break;
    }
  }
  return { resubscribe };
}
