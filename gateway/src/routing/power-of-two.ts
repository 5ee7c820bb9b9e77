/**
 * Power of two choices (Mitzenmacher): sample two distinct backends at random
 * and take the less loaded (`requestLoad`). Nearly least-load balance with
 * less herding on stale load; no cache awareness.
 *
 * @example
 * createPowerOfTwoPolicy().choose(req, backends, rand);
 */
import { decide, requestLoad } from "./load-score";
import type { RoutingPolicy } from "./policy";

export function createPowerOfTwoPolicy(): RoutingPolicy {
  return {
    name: "power-of-two",
    choose(_req, backends, rand) {
      const n = backends.length;
      if (n === 1) return decide(backends[0]!, "only");
      const a = Math.min(n - 1, Math.floor(rand() * n));
      let b = Math.min(n - 2, Math.floor(rand() * (n - 1)));
      if (b >= a) b += 1;
      const x = backends[a]!;
      const y = backends[b]!;
      return decide(requestLoad(y) < requestLoad(x) ? y : x, "load");
    },
  };
}
