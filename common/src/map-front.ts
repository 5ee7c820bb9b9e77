/**
 * A Map's oldest key (insertion order), taken in O(1): for LRU maps that
 * move an entry to the end by deleting and setting it, and drop from the front.
 *
 * `map.keys().next()` is not O(1) on Bun: JavaScriptCore keeps a deleted
 * entry's slot until the table is rehashed, and a new iterator walks past
 * every such slot from the start. An LRU that drops its front one key at a
 * time leaves a run of them there: at 50,000 entries the first key cost
 * ~12 us (the model server's prefix-cache eviction, one per new KV block),
 * and a gateway's 262,144-block prefix index ~1.5 us per key, growing with
 * the run (docs/reliability.md, "The GPU soak"). One live iterator kept at
 * the front walks past each slot once: ~0.15 us.
 *
 * Correct as long as every key it returns is deleted before the next call
 * (`shift` does that), so nothing live ever lies behind the iterator:
 * entries deleted elsewhere are skipped, re-set ones come again at the end.
 *
 * @example
 * const lru = new Map<number, true>([[1, true], [2, true]]);
 * const front = mapFront(lru);
 * lru.delete(1); lru.set(1, true);   // 1 used: now the newest
 * front.shift();                      // 2 (and deleted from lru)
 */
export interface MapFront<K, V> {
  /** Deletes the oldest key from the map and returns it; undefined when the map is empty. */
  shift(): K | undefined;
  /** The same, with the value it held. */
  shiftEntry(): [K, V] | undefined;
}

export function mapFront<K, V>(map: Map<K, V>): MapFront<K, V> {
  let it = map.entries();
  const shiftEntry = (): [K, V] | undefined => {
    if (map.size === 0) return undefined; // a `done` iterator stays done: never run it off the end
    let n = it.next();
    if (n.done) {
      // not reachable while the contract holds; a new iterator costs one walk, not a wrong answer
      it = map.entries();
      n = it.next();
      if (n.done) return undefined;
    }
    map.delete(n.value[0]);
    return n.value;
  };
  return { shift: () => shiftEntry()?.[0], shiftEntry };
}
