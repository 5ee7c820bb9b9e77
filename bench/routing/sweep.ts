/**
 * Variants of the dispatch policy against chosen baselines, on the generated
 * workloads, without writing results: how the rows of docs/routing.md's
 * "What closed the shared-prefix miss" were measured.
 *
 *   bun bench/routing/sweep.ts --variants '[{"label":"mw1","dispatch":{"missWeight":1}},
 *     {"label":"margin0.5","router":{"pendingHotMargin":0.5}}]' \
 *     --workloads shared-prefix,multi-turn-nokey --loads 0.8,0.95 --seeds 6 --first-seed 1
 *
 * `router` takes simulate()'s routerOptions (pendingTtlMs, pendingHotShare,
 * pendingHotMargin); `dispatch` takes the cost model's constants.
 */
import { createPolicy } from "@dispatch/gateway/src/routing/create-policy";
import type { DispatchCostOptions } from "@dispatch/gateway/src/routing/dispatch-cost";
import { LOADS, runWorkload } from "./matrix";
import { BENCH_POLICIES, type BenchPolicy } from "./policies";
import type { Workload } from "./workload";
import { multiTurnWorkload, sharedPrefixWorkload, zipfWorkload } from "./workloads";

interface Variant {
  label: string;
  router?: BenchPolicy["routerOptions"];
  dispatch?: DispatchCostOptions;
}

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}

const WORKLOADS: Record<string, (seed: number) => Workload> = {
  "shared-prefix": (s) => sharedPrefixWorkload(64, s),
  "multi-turn": (s) => multiTurnWorkload(64, s),
  "multi-turn-nokey": (s) => multiTurnWorkload(64, s, 256, 6, false),
  "zipf-groups": (s) => zipfWorkload(64, s),
};

const seeds = Number(flag("seeds") ?? 3);
const first = Number(flag("first-seed") ?? 1);
const loads = flag("loads")?.split(",").map(Number) ?? LOADS;
const names = flag("workloads")?.split(",") ?? Object.keys(WORKLOADS);
const baselines = (flag("baselines") ?? "oracle,dispatch,sglang-cache-aware").split(",");
const variants = JSON.parse(flag("variants") ?? "[]") as Variant[];
if (!(seeds >= 1) || !(first >= 1) || loads.some((l) => !(l > 0))) throw new Error("--seeds, --first-seed and --loads must be positive");

const policies: BenchPolicy[] = [
  ...BENCH_POLICIES.filter((p) => baselines.includes(p.label)),
  ...variants.map((v) => ({ label: v.label, indexMode: "exact" as const, baseline: false, routerOptions: v.router, make: () => createPolicy("dispatch", { dispatch: v.dispatch }) })),
];
for (const name of names) {
  const make = WORKLOADS[name];
  if (!make) throw new Error(`unknown workload ${name} (known: ${Object.keys(WORKLOADS).join(", ")})`);
  const runs = Array.from({ length: seeds }, (_, i) => ({ seed: first + i, workload: make(first + i) }));
  await runWorkload(runs, policies, loads, (l) => console.log(l));
}
