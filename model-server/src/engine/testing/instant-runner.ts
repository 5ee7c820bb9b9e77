/**
 * A ModelRunner whose steps cost no compute, for measuring the engine's own host time per step.
 * It does the host work the CUDA runner does around the device (model/cuda-runner.ts): every
 * step is packed with the real packStep (backend/cuda/pack-step.ts, with its checks), and
 * forwardSampled builds the per-row sampling parameters the same way; then, instead of a
 * kernel launch, the "model" answers at once. The next token of a row is a fixed function of
 * the token and position it was given: (31 * token + pos + 7) mod (V - 1), so EOS (V - 1)
 * never comes out and the output is deterministic whatever the batch.
 * forward() returns logits peaked at that token (host sampling path, the CPU backend's shape).
 * With `deviceMs` the result arrives after that long on a timer, the engine's thread free meanwhile.
 *
 * @example
 * const r = createInstantRunner({ vocabSize: 151936 });
 * createEngine({ runner: r, ... }); // r.stats.hostGapsMs: time between steps spent outside the runner
 */
import { packSampling, packStep } from "../../backend/cuda/pack-step";
import type { KvExport, ModelRunner, ModelSpec, StepInput, StepOutput } from "../../model/runner";
import type { GpuSampling, SampledRows } from "../gpu-sampling";

export interface InstantRunnerOptions {
  vocabSize?: number;
  maxContext?: number;
  /** Block-table stride (the CUDA addon's: blocks per table row). */
  stride?: number;
  /** Offer forwardSampled (the CUDA runner's shape); false: forward only (the CPU runner's). */
  sampled?: boolean;
  /**
   * Simulated device time per step, ms: the result arrives on a timer, as a CUDA step's does on
   * its worker thread's completion, so the engine's thread is free meanwhile. 0: at once.
   */
  deviceMs?: number;
}

export interface InstantRunner extends ModelRunner {
  forwardSampled?(step: StepInput, sampling: GpuSampling[]): Promise<SampledRows[]>;
  readonly stats: {
    steps: number;
    /** Per step: sequences in it and whether every chunk was a one-token decode. */
    batch: number[];
    decodeOnly: boolean[];
    /** Per step: ms from the previous step's result to this step's call (the engine's host time). */
    gapMs: number[];
    /** Per step: ms from the previous step's call to this one's (the step period). */
    periodMs: number[];
    /** Per step: ms spent in packStep and the sampling-parameter build (the runner's host time). */
    packMs: number[];
  };
}

export function instantNext(token: number, pos: number, V: number): number {
  return (31 * token + pos + 7) % (V - 1);
}

export function createInstantRunner(o: InstantRunnerOptions = {}): InstantRunner {
  const V = o.vocabSize ?? 151936;
  const spec: ModelSpec = { modelId: "instant", architecture: "instant", vocabSize: V, maxContext: o.maxContext ?? 40960, numLayers: 1, eosTokenIds: [V - 1] };
  let kv: { numBlocks: number; blockSize: number; stride: number } | null = null;
  const stats: InstantRunner["stats"] = { steps: 0, batch: [], decodeOnly: [], gapMs: [], periodMs: [], packMs: [] };
  let lastReturn = -1;
  let lastCall = -1;
  const device = async (): Promise<void> => {
    if (o.deviceMs) await new Promise((r) => setTimeout(r, o.deviceMs));
    lastReturn = performance.now();
  };

  function begin(step: StepInput): ReturnType<typeof packStep> {
    const t = performance.now();
    if (!kv) throw new Error("allocateKv() must be called before forward()");
    stats.gapMs.push(lastReturn < 0 ? Number.NaN : t - lastReturn);
    stats.periodMs.push(lastCall < 0 ? Number.NaN : t - lastCall);
    lastCall = t;
    stats.steps++;
    stats.batch.push(step.seqs.length);
    stats.decodeOnly.push(step.seqs.every((s) => s.tokens.length === 1));
    return packStep(step, { blockSize: kv.blockSize, numBlocks: kv.numBlocks, stride: kv.stride, vocabSize: V, maxContext: spec.maxContext });
  }

  const runner: InstantRunner = {
    spec,
    backend: "cuda",
    stats,
    allocateKv(numBlocks, blockSize) {
      kv = { numBlocks, blockSize, stride: o.stride ?? Math.ceil(spec.maxContext / blockSize) };
    },
    kvBytesPerBlock: (blockSize) => blockSize * 4,
    async forward(step: StepInput): Promise<StepOutput> {
      const t = performance.now();
      const p = begin(step);
      stats.packMs.push(performance.now() - t);
      const out = step.seqs.map((s, i) => {
        const n = p.logitCounts[i]!;
        const logits = new Float32Array(n * V).fill(-30);
        for (let j = 0; j < n; j++) {
          const at = s.tokens.length - n + j;
          logits[j * V + instantNext(s.tokens[at]!, s.startPos + at, V)] = 0;
        }
        return logits;
      });
      await device();
      return out;
    },
    exportKv(blockIds): KvExport {
      return { numBlocks: blockIds.length, blockSize: kv?.blockSize ?? 16, data: new Uint8Array(blockIds.length * 4), dtype: "f32" };
    },
    importKv() {},
    close() {
      kv = null;
    },
  };
  if (o.sampled !== false) {
    runner.forwardSampled = async (step, sampling) => {
      const t = performance.now();
      if (sampling.length !== step.seqs.length) throw new RangeError(`${sampling.length} sampling entries for ${step.seqs.length} sequences`);
      const p = begin(step);
      // the CUDA runner's parameter block, built the same way (backend/cuda/pack-step.ts)
      packSampling(sampling, p.logitCounts, p.R, spec.vocabSize);
      stats.packMs.push(performance.now() - t);
      const ids = new Int32Array(p.R);
      const logprobs = new Float32Array(p.R);
      let at = 0;
      const out = step.seqs.map((s, i) => {
        const n = p.logitCounts[i]!;
        for (let j = 0; j < n; j++) {
          const k = s.tokens.length - n + j;
          ids[at + j] = instantNext(s.tokens[k]!, s.startPos + k, V);
          logprobs[at + j] = -0.5;
        }
        const rows = { ids: ids.subarray(at, at + n), logprobs: logprobs.subarray(at, at + n) };
        at += n;
        return rows;
      });
      await device();
      return out;
    };
  }
  return runner;
}
