/**
 * Consistent hashing on the prompt's prefix: a hash ring with `virtualNodes`
 * points per backend; the key is the chained hash of the block that ends the
 * first `prefixTokens` tokens (so it identifies the whole leading prefix), or
 * the affinity key when the request carries one. Equal prefixes always land on
 * the same backend and adding a backend moves only ~1/n of the keys.
 *
 * What it cannot do: see load. A hot prefix stays on one backend however
 * overloaded it is, and prompts that share a long system prompt collapse onto
 * one backend when `prefixTokens` is shorter than that prompt.
 *
 * @example
 * createConsistentHashPolicy({ prefixTokens: 256 }).choose(req, backends, rand);
 */
import { decide } from "./load-score";
import type { BackendView, RoutingPolicy } from "./policy";

export interface ConsistentHashOptions {
  /** Tokens of prefix that make the key (rounded down to whole blocks, at least one). Default 512. */
  prefixTokens?: number;
  /** Ring points per backend. Default 64. */
  virtualNodes?: number;
}

interface Ring {
  points: bigint[];
  owners: string[];
}

export function createConsistentHashPolicy(options: ConsistentHashOptions = {}): RoutingPolicy {
  const prefixTokens = options.prefixTokens ?? 512;
  const vnodes = options.virtualNodes ?? 64;
  let cachedKey = "";
  let cachedRing: Ring = { points: [], owners: [] };

  function ring(backends: readonly BackendView[]): Ring {
    const key = backends.map((b) => b.id).join("\u0000");
    if (key === cachedKey) return cachedRing;
    const entries: Array<[bigint, string]> = [];
    for (const b of backends) {
      for (let v = 0; v < vnodes; v++) entries.push([hashString(`${b.id}#${v}`), b.id]);
    }
    entries.sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] < y[1] ? -1 : 1));
    cachedKey = key;
    cachedRing = { points: entries.map((e) => e[0]), owners: entries.map((e) => e[1]) };
    return cachedRing;
  }

  return {
    name: "consistent-hash",
    choose(req, backends, rand) {
      let key: bigint | undefined;
      if (req.affinityKey) key = hashString(`affinity:${req.affinityKey}`);
      else if (req.blockHashes.length > 0) {
        const blocks = Math.max(1, Math.floor(prefixTokens / req.blockSize));
        // Re-mixed so that keys which are not uniform 64-bit values still spread.
        key = mix64(req.blockHashes[Math.min(blocks, req.blockHashes.length) - 1]!);
      }
      if (key === undefined) {
        // No full block to key on: any backend is as good as another.
        return decide(backends[Math.min(backends.length - 1, Math.floor(rand() * backends.length))]!, "short");
      }
      const r = ring(backends);
      let lo = 0;
      let hi = r.points.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (r.points[mid]! < key) lo = mid + 1;
        else hi = mid;
      }
      const owner = r.owners[lo === r.points.length ? 0 : lo]!;
      return decide(backends.find((b) => b.id === owner)!, req.affinityKey ? "affinity" : "hash");
    },
  };
}

/** splitmix64's finaliser: a bijection on 64-bit values that spreads nearby inputs. */
function mix64(x: bigint): bigint {
  let z = BigInt.asUintN(64, x + 0x9e3779b97f4a7c15n);
  z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
  z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
  return z ^ (z >> 31n);
}

const encoder = new TextEncoder();
function hashString(s: string): bigint {
  return BigInt.asUintN(64, BigInt(Bun.hash.xxHash64(encoder.encode(s), 0n)));
}
