/** Runs every workload x load x policy (x seed) through the simulator and averages over seeds. */
import { capacityPerMs, pooledReuse } from "./capacity";
import { summarize, type RunSummary } from "./metrics";
import type { BenchPolicy } from "./policies";
import type { EngineConfig } from "./sim-server";
import { simulate } from "./simulate";
import type { Workload } from "./workload";

/** The simulated engine (see sim-server.ts); KV size comes from each workload. */
export const ENGINE: Omit<EngineConfig, "kvBlocks"> = {
  blockSize: 64,
  chunkTokens: 2048,
  maxBatch: 128,
  prefillMsPerToken: 0.1,
  stepBaseMs: 5,
  stepPerSeqMs: 0.25,
};
export const SERVERS = 8;
export const LOADS = [0.5, 0.8, 0.95];

export interface CellResult {
  workload: string;
  load: number;
  policy: string;
  seeds: number;
  hitRate: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  imbalanceCv: number;
  makespanS: number;
  reasons: Record<string, number>;
}

export interface WorkloadInfo {
  name: string;
  description: string;
  requests: number;
  kvTokensPerServer: number;
  capacityReqPerS: number;
  pooledHitRate: number;
}

export function engineFor(w: Workload): EngineConfig {
  return { ...ENGINE, kvBlocks: Math.floor(w.kvTokensPerServer / ENGINE.blockSize) };
}

/**
 * `variants` holds one workload per seed (generated workloads differ by seed;
 * a trace is the same data each time and gets one).
 */
export async function runWorkload(
  variants: Array<{ seed: number; workload: Workload }>,
  policies: BenchPolicy[],
  loads: number[],
  log: (line: string) => void,
): Promise<{ info: WorkloadInfo; cells: CellResult[] }> {
  const first = variants[0]!.workload;
  const engine = engineFor(first);
  const caps = variants.map((v) => capacityPerMs(v.workload, engine, SERVERS));
  const info: WorkloadInfo = {
    name: first.name,
    description: first.description,
    requests: first.requests.length,
    kvTokensPerServer: first.kvTokensPerServer,
    capacityReqPerS: (caps.reduce((a, b) => a + b, 0) / caps.length) * 1000,
    pooledHitRate: pooledReuse(first, engine.blockSize, SERVERS * engine.kvBlocks).hitRate,
  };
  const cells: CellResult[] = [];
  for (const load of loads) {
    for (const p of policies) {
      const runs: RunSummary[] = [];
      for (const [i, v] of variants.entries()) {
        const r = await simulate({
          workload: v.workload,
          engine,
          servers: SERVERS,
          ratePerMs: caps[i]! * load,
          seed: v.seed,
          indexMode: p.indexMode,
          routerOptions: p.routerOptions,
          policy: p.make,
        });
        runs.push(summarize(r));
      }
      const mean = (f: (r: RunSummary) => number) => runs.reduce((a, r) => a + f(r), 0) / runs.length;
      const cell: CellResult = {
        workload: first.name,
        load,
        policy: p.label,
        seeds: runs.length,
        hitRate: mean((r) => r.hitRate),
        ttftP50Ms: mean((r) => r.ttftP50Ms),
        ttftP99Ms: mean((r) => r.ttftP99Ms),
        imbalanceCv: mean((r) => r.imbalanceCv),
        makespanS: mean((r) => r.makespanS),
        reasons: runs[0]!.reasons,
      };
      cells.push(cell);
      log(`${first.name.padEnd(15)} ${String(Math.round(load * 100)).padStart(3)}%  ${p.label.padEnd(25)} hit ${cell.hitRate.toFixed(3)}  p50 ${cell.ttftP50Ms.toFixed(0).padStart(6)} ms  p99 ${cell.ttftP99Ms.toFixed(0).padStart(7)} ms  cv ${cell.imbalanceCv.toFixed(3)}`);
    }
  }
  return { info, cells };
}
