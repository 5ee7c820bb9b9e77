/**
 * llm-d's scheduler (its Gateway API inference extension "endpoint picker"):
 * independent scorers, each in [0, 1], summed with weights; the highest total
 * wins (ties at random). Its default profile weights:
 * - prefix 3: matched prompt blocks / prompt blocks;
 * - queue 2: min-max normalised waiting queue, 1 for the shortest
 *   (`queueDepth`), 1 for all when every queue is equal;
 * - kv 2: 1 - KV-cache utilisation.
 * The weights trade cache against load at a fixed exchange rate that does not
 * depend on how long the prompt is or how much work is queued: the weakness
 * dispatch's cost policy fixes.
 *
 * @example
 * createWeightedScorersPolicy({ prefix: 3, queue: 2, kv: 2 }).choose(req, backends, rand);
 */
import { argMin, decide, kvUsage, queueDepth } from "./load-score";
import type { RoutingPolicy } from "./policy";

export interface ScorerWeights {
  prefix?: number;
  queue?: number;
  kv?: number;
}

export function createWeightedScorersPolicy(weights: ScorerWeights = {}): RoutingPolicy {
  const wPrefix = weights.prefix ?? 3;
  const wQueue = weights.queue ?? 2;
  const wKv = weights.kv ?? 2;
  return {
    name: "llm-d-weighted",
    choose(req, backends, rand) {
      const blocks = req.blockHashes.length;
      const queues = backends.map(queueDepth);
      const qMax = Math.max(...queues);
      const qMin = Math.min(...queues);
      const scores = backends.map((b, i) => {
        const prefix = blocks > 0 ? (b.matchedBlocks ?? 0) / blocks : 0;
        const queue = qMax === qMin ? 1 : (qMax - queues[i]!) / (qMax - qMin);
        const kv = 1 - kvUsage(b);
        return wPrefix * prefix + wQueue * queue + wKv * kv;
      });
      return decide(backends[argMin(scores.map((s) => -s), rand)]!, "score");
    },
  };
}
