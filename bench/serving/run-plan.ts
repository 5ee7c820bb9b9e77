/**
 * Which serve-bench runs device-serve.ts makes at one concurrency, and what the gateway's TTFT
 * overhead is from them. Pure: no sockets, no timers.
 *
 * A fair gateway-versus-direct comparison needs both targets to meet the same server state:
 *   - every run sends prompts no earlier run sent (its own seed), so no run hits another's
 *     cached prefix (a cached 512-token prompt's TTFT is a tenth of an uncached one's);
 *   - one unmeasured warm-up run per concurrency before the measured ones, with its own prompts,
 *     so CUDA graphs for that batch size are captured and buffers grown before anything counts;
 *   - the overhead runs interleave the targets in blocks of gateway, direct, direct, gateway
 *     (G D D G), so neither target always runs first or always follows the other, and the
 *     overhead is the median of each target's per-run TTFT p50 with the spread of the ratios of
 *     the G/D pairs (the i-th gateway run with the i-th direct run: adjacent in each block).
 *
 * @example
 *   const plan = createRunPlanner({ inputLen: 512, outputLen: 256 });
 *   plan.warmup(64);          // { phase: "warmup", target: "gateway", numPrompts: 64, outputLen: 16, seed: 101 }
 *   plan.main(64);            // gateway then direct-rpc, 128 prompts each, 256 out, seeds 102 and 103
 *   plan.overheadBlock(64, 0); // gateway, direct-rpc, direct-rpc, gateway: 64 prompts, 16 out, seeds 104..107
 */
export type Target = "gateway" | "direct-rpc";
export type Phase = "warmup" | "main" | "overhead";

export interface PlannedRun {
  phase: Phase;
  target: Target;
  concurrency: number;
  numPrompts: number;
  inputLen: number;
  outputLen: number;
  seed: number;
  /** overhead runs: which G D D G block */
  block?: number;
}

export interface PlanOptions {
  inputLen: number;
  outputLen: number;
  /** Output tokens of the warm-up and the overhead runs (TTFT only); default 16, at most outputLen. */
  shortOutputLen?: number;
  /** First seed handed out; each run takes the next one. Default 101. */
  firstSeed?: number;
  /** Main runs send this many waves of the concurrency's prompts (default 2; more: a longer steady state). */
  waves?: number;
}

/** The targets of `blocks` blocks of G D D G, in order. */
export function interleaveOrder(blocks: number): Target[] {
  if (!Number.isInteger(blocks) || blocks < 0) throw new RangeError(`blocks must be a non-negative integer, got ${blocks}`);
  return Array.from({ length: blocks }, () => ["gateway", "direct-rpc", "direct-rpc", "gateway"] as Target[]).flat();
}

/** Prompts per main run: `waves` (default 2) x concurrency, at least 4 (the workload serve-bench reports in full). */
export const mainPrompts = (c: number, waves = 2): number => Math.max(4, waves * c);
/** Prompts per overhead run: one wave of the concurrency, at least 4 (TTFT samples at c = 1). */
export const overheadPrompts = (c: number): number => Math.max(4, c);

export function createRunPlanner(o: PlanOptions) {
  if (!(o.inputLen > 0 && o.outputLen > 0)) throw new RangeError("inputLen and outputLen must be positive");
  const short = Math.min(o.outputLen, o.shortOutputLen ?? 16);
  if (!(short > 0)) throw new RangeError(`shortOutputLen must be positive, got ${o.shortOutputLen}`);
  const waves = o.waves ?? 2;
  if (!Number.isInteger(waves) || waves < 1) throw new RangeError(`waves must be a positive integer, got ${o.waves}`);
  let seed = o.firstSeed ?? 101;
  const run = (phase: Phase, target: Target, concurrency: number, numPrompts: number, outputLen: number, block?: number): PlannedRun => {
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`);
    return { phase, target, concurrency, numPrompts, inputLen: o.inputLen, outputLen, seed: seed++, ...(block === undefined ? {} : { block }) };
  };
  return {
    shortOutputLen: short,
    /** One unmeasured run through the gateway (the whole path): one wave of c prompts, short output. */
    warmup: (c: number): PlannedRun => run("warmup", "gateway", c, c, short),
    /** The full workload through the gateway, then direct: what the table reports. */
    main: (c: number): PlannedRun[] => [run("main", "gateway", c, mainPrompts(c, waves), o.outputLen), run("main", "direct-rpc", c, mainPrompts(c, waves), o.outputLen)],
    /** Block `b` of the overhead runs: G D D G, one wave each, short output. */
    overheadBlock: (c: number, b: number): PlannedRun[] => interleaveOrder(1).map((t) => run("overhead", t, c, overheadPrompts(c), short, b)),
  };
}

export interface OverheadSample {
  target: Target;
  /** the run's TTFT p50, ms */
  ttftP50Ms: number;
}

export interface OverheadSummary {
  runsPerTarget: number;
  gatewayTtftP50Ms: number;
  directTtftP50Ms: number;
  /** median gateway TTFT p50 - median direct TTFT p50 */
  gatewayAddedTtftMs: number;
  /** (median gateway / median direct - 1) x 100 */
  gatewayAddedTtftPct: number;
  /** per G/D pair: gateway TTFT p50 / direct TTFT p50 */
  pairRatios: number[];
  pairRatioMin: number;
  pairRatioMax: number;
}

export function median(xs: number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The gateway's share of TTFT from interleaved runs (samples in run order). */
export function summarizeOverhead(samples: OverheadSample[]): OverheadSummary {
  const g = samples.filter((s) => s.target === "gateway").map((s) => s.ttftP50Ms);
  const d = samples.filter((s) => s.target === "direct-rpc").map((s) => s.ttftP50Ms);
  if (g.length === 0 || g.length !== d.length) throw new RangeError(`overhead needs as many gateway as direct runs (at least one), got ${g.length} and ${d.length}`);
  const mg = median(g);
  const md = median(d);
  const pairRatios = g.map((x, i) => +(x / d[i]!).toFixed(4));
  return {
    runsPerTarget: g.length,
    gatewayTtftP50Ms: +mg.toFixed(3),
    directTtftP50Ms: +md.toFixed(3),
    gatewayAddedTtftMs: +(mg - md).toFixed(3),
    gatewayAddedTtftPct: +((mg / md - 1) * 100).toFixed(2),
    pairRatios,
    pairRatioMin: Math.min(...pairRatios),
    pairRatioMax: Math.max(...pairRatios),
  };
}
