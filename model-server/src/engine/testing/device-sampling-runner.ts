/**
 * Wraps a real runner (the CPU runner in tests) and gives it the CUDA runner's
 * `forwardSampled`: the wrapped runner's forward(), then each row sampled here the way
 * native-cuda/src/sampling.cu does it (argmax of the allowed ids, lowest index on ties; at a
 * temperature, the smallest probability threshold keeping >= top_k ids and >= top_p of the
 * mass, ties kept; one draw u = counterUniform(seed, step) scanned over the kept ids in index
 * order; the raw log-probability). The threshold is exact here where the device bisects it.
 * It records which method each step called, so engine tests on a CPU machine can check which
 * path the engine takes and that both paths give the same tokens.
 * With `{ extras: true }` it also takes penalties (in the device's fp32 arithmetic, the chained input token counted
 * where the row says so) and top log-probabilities, as the CUDA runner's `samplingExtras`.
 * With `{ chains: true }` it also chains sampled steps as the CUDA runner does (model_steps.cu): a call
 * may come before the previous one resolves (at most two in flight, as the addon allows), every step
 * runs after the one called before it (one stream), and a `chain` entry r >= 0 replaces the
 * sequence's one token with the id sampled for row r of the previous step.
 *
 * @example
 * const r = withDeviceSampling(cpuRunner);
 * createEngine({ runner: r, ... }); // later: r.calls -> ["forward", "forwardSampled", ...]
 */
import type { GpuSampling, SampledRows } from "../gpu-sampling";
import type { ModelRunner, StepInput } from "../../model/runner";
import { counterUniform } from "../rng";
import { scoreToken } from "../sampler";

export interface DeviceSamplingRunner extends ModelRunner {
  forwardSampled(step: StepInput, sampling: GpuSampling[], chain?: Int32Array): Promise<SampledRows[]>;
  /** Set with `{ chains: true }` (the engine then overlaps decode steps). */
  readonly chainsSampled?: true;
  /** Calls that chained tokens, and the most steps in flight at once. */
  readonly chained: { calls: number; maxInFlight: number };
  /** Method called by each step, in order. */
  readonly calls: ("forward" | "forwardSampled")[];
  /** The sampling entries of each forwardSampled call. */
  readonly sampled: GpuSampling[][];
}

/** One row sampled as the device sampler does (see the file comment). */
export function sampleRowLikeDevice(row: Float32Array, s: GpuSampling): { id: number; logprob: number } {
  const V = row.length;
  const banned = new Set(s.banned ?? []);
  let rawMax = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < V; i++) rawMax = Math.max(rawMax, row[i]!);
  let sum = 0;
  for (let i = 0; i < V; i++) sum += Math.exp(row[i]! - rawMax);
  const logZ = rawMax + Math.log(sum);
  // the device's argmax: the first allowed id above -FLT_MAX (NaN never is); none: id -1
  let best = -1;
  let bestV = -3.4028234663852886e38;
  for (let i = 0; i < V; i++) if (!banned.has(i) && row[i]! > bestV) (best = i), (bestV = row[i]!);
  if (best < 0) return { id: -1, logprob: Number.NaN };
  const pick = (id: number) => ({ id, logprob: row[id]! - logZ });
  if (s.temperature <= 0 || s.topK === 1) return pick(best);
  const q = new Float64Array(V);
  for (let i = 0; i < V; i++) q[i] = banned.has(i) ? 0 : Math.exp((row[i]! - row[best]!) / s.temperature);
  const sorted = Array.from(q).filter((x) => x > 0).sort((a, b) => b - a);
  const total = sorted.reduce((a, b) => a + b, 0);
  let n = sorted.length;
  const limitK = s.topK > 0 && s.topK < V;
  const limitP = s.topP > 0 && s.topP < 1;
  if (limitK || limitP) {
    let need = limitK ? Math.min(s.topK, sorted.length) : 1;
    if (limitP) {
      let acc = 0;
      let m = 0;
      while (m < sorted.length && acc < s.topP * total) acc += sorted[m++]!;
      need = Math.max(need, m);
    }
    n = need;
  }
  const tau = n > 0 ? sorted[n - 1]! : 0;
  let kept = 0;
  for (let i = 0; i < V; i++) if (q[i]! > 0 && q[i]! >= tau) kept += q[i]!;
  const u = counterUniform(s.seed, s.step) * kept;
  let acc = 0;
  for (let i = 0; i < V; i++) {
    if (!(q[i]! > 0 && q[i]! >= tau)) continue;
    acc += q[i]!;
    if (acc > u) return pick(i);
  }
  return pick(best);
}

function penalizes(g: GpuSampling): boolean {
  return (g.frequencyPenalty ?? 0) !== 0 || (g.presencePenalty ?? 0) !== 0;
}

/** A copy of the row with the device's penalties (sampling_extras.cuh): its fp32 arithmetic, the input token counted
 * once more where the row says so (the chained token the host had not counted). */
export function penalizedLikeDevice(raw: Float32Array, g: GpuSampling, tokens: Int32Array): Float32Array {
  const x = new Float32Array(raw);
  const f = Math.fround(g.frequencyPenalty ?? 0);
  const p = Math.fround(g.presencePenalty ?? 0);
  const counts = new Map<number, number>();
  const pen = g.penalties ?? new Int32Array(0);
  for (let k = 0; k < pen.length; k += 2) counts.set(pen[k]!, pen[k + 1]!);
  if (g.penalizeInput) {
    const t = tokens[tokens.length - 1]!;
    counts.set(t, (counts.get(t) ?? 0) + 1);
  }
  for (const [t, c] of counts) if (t >= 0 && t < x.length && c > 0) x[t] = Math.fround(Math.fround(x[t]! - f * c) - p);
  return x;
}

export function withDeviceSampling(inner: ModelRunner, o: { chains?: boolean; extras?: boolean } = {}): DeviceSamplingRunner {
  const calls: ("forward" | "forwardSampled")[] = [];
  const sampled: GpuSampling[][] = [];
  const chained = { calls: 0, maxInFlight: 0 };
  const V = inner.spec.vocabSize;
  let inFlight = 0;
  // the previous step's ids, every logits row in order (what the device keeps in `sampled_`); settles after it ran
  let previous: Promise<Int32Array> = Promise.resolve(new Int32Array(0));

  async function run(step: StepInput, sampling: GpuSampling[], chain: Int32Array | undefined, before: Promise<Int32Array>): Promise<{ rows: SampledRows[]; ids: Int32Array }> {
    const prevIds = await before.catch(() => new Int32Array(0));
    if (chain) {
      step = {
        seqs: step.seqs.map((q, i) => {
          const r = chain[i]!;
          if (r < 0) return q;
          if (r >= prevIds.length || q.tokens.length !== 1) throw new RangeError(`chain entry ${r} for sequence ${i}: the previous step has ${prevIds.length} rows`);
          return { ...q, tokens: Int32Array.of(prevIds[r]! >= 0 ? prevIds[r]! : 0) };
        }),
      };
    }
    const logits = await inner.forward(step);
    const all: number[] = [];
    const rows = logits.map((l, i) => {
      const n = step.seqs[i]!.numLogits;
      // host-sampled sequences: their logits rows come back (as the CUDA runner's hostRows)
      if (sampling[i]!.host) {
        for (let j = 0; j < n; j++) all.push(0);
        return { ids: new Int32Array(n), logprobs: new Float32Array(n), logits: l };
      }
      const ids = new Int32Array(n);
      const logprobs = new Float32Array(n);
      const g = sampling[i]!;
      const topN = g.topLogprobs ?? 0;
      if (!o.extras && (topN > 0 || penalizes(g))) throw new RangeError("this runner samples no penalties or top log-probabilities");
      const top: SampledRows["top"] = topN > 0 ? [] : undefined;
      for (let j = 0; j < n; j++) {
        const raw = l.subarray(j * V, (j + 1) * V);
        const row = penalizes(g) ? penalizedLikeDevice(raw, g, step.seqs[i]!.tokens) : raw;
        const r = sampleRowLikeDevice(row, { ...g, step: g.step + j });
        ids[j] = r.id;
        // the device reports the raw distribution's log-probabilities (as the host sampler)
        const scored = r.id >= 0 ? scoreToken(raw, r.id, topN) : null;
        logprobs[j] = scored ? scored.logprob : r.logprob;
        top?.push(scored?.top ?? []);
        all.push(r.id);
      }
      return top ? { ids, logprobs, top } : { ids, logprobs };
    });
    return { rows, ids: Int32Array.from(all) };
  }

  const runner: DeviceSamplingRunner = {
    spec: inner.spec,
    backend: inner.backend,
    calls,
    sampled,
    chained,
    allocateKv: (n, b) => inner.allocateKv(n, b),
    kvBytesPerBlock: (b) => inner.kvBytesPerBlock(b),
    exportKv: (ids) => inner.exportKv(ids),
    importKv: (ids, kv) => inner.importKv(ids, kv),
    close: () => inner.close(),
    forward(step) {
      calls.push("forward");
      return inner.forward(step);
    },
    async forwardSampled(step, sampling, chain) {
      if (sampling.length !== step.seqs.length) throw new RangeError(`${sampling.length} sampling entries for ${step.seqs.length} sequences`);
      if (chain && !o.chains) throw new Error("this runner does not chain steps");
      if (inFlight >= 2) throw new Error("two steps are already in flight on this model");
      calls.push("forwardSampled");
      sampled.push(sampling.map((s) => ({ ...s, banned: [...(s.banned ?? [])] })));
      if (chain) chained.calls++;
      inFlight++;
      chained.maxInFlight = Math.max(chained.maxInFlight, inFlight);
      const p = run(step, sampling, chain, previous);
      previous = p.then((r) => r.ids);
      previous.catch(() => {}); // a failed step is reported to its caller; the next one only waits for it
      try {
        return (await p).rows;
      } finally {
        inFlight--;
      }
    },
  };
  if (o.chains) (runner as { chainsSampled?: true }).chainsSampled = true;
  if (o.extras) (runner as { samplingExtras?: boolean }).samplingExtras = true;
  return runner;
}
